#!/bin/sh
# Creates Temporal's two databases on the shared Postgres and brings their schemas to the
# version of the schema tool. Safe to run again (existing databases and applied versions are
# skipped). Compose runs it in temporalio/admin-tools (the defaults below); `make run-cluster`
# runs this same file with the tool and schema files of the pinned go.temporal.io/server
# built into bin/dev, and the database names derived from DATABASE_URL. The password is
# SQL_PASSWORD (read by the tool).
set -eu
tool=${TEMPORAL_SQL_TOOL:-temporal-sql-tool}
schema=${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}
sql() { "$tool" --plugin postgres12 --ep "${SQL_HOST:-postgres}" -p "${SQL_PORT:-5432}" -u "${SQL_USER:-postgres}" "$@"; }
for db in "temporal:${TEMPORAL_DB:-temporal}" "visibility:${TEMPORAL_VISIBILITY_DB:-temporal_visibility}"; do
	dir=${db%%:*}
	name=${db#*:}
	sql --db "$name" create
	sql --db "$name" setup-schema -v 0.0
	sql --db "$name" update-schema -d "$schema/$dir/versioned"
done
echo "temporal schemas ready"
