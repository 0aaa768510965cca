#!/bin/sh
# Creates Temporal's two databases on the shared Postgres and brings their schemas to the
# version of this admin-tools image. Safe to run again (existing databases and applied
# versions are skipped). Runs in temporalio/admin-tools; the password is SQL_PASSWORD.
set -eu
sql() { temporal-sql-tool --plugin postgres12 --ep postgres -p 5432 -u postgres "$@"; }
schema=/etc/temporal/schema/postgresql/v12
for db in temporal:temporal visibility:temporal_visibility; do
	dir=${db%%:*}
	name=${db#*:}
	sql --db "$name" create
	sql --db "$name" setup-schema -v 0.0
	sql --db "$name" update-schema -d "$schema/$dir/versioned"
done
echo "temporal schemas ready"
