#!/bin/sh
# Runs once, when the Postgres volume is first initialised: the service's own role and
# database (Temporal's databases are made by the temporal-schema step, as postgres).
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
	--set=pw="$LOCKERNET_DB_PASSWORD" <<'SQL'
CREATE ROLE lockernet LOGIN PASSWORD :'pw';
CREATE DATABASE lockernet OWNER lockernet;
SQL
