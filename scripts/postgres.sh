#!/usr/bin/env bash
# Starts the local Postgres cluster and creates the test database and roles.
# Prints nothing on success; tests read SANDLOT_TEST_POSTGRES (see Makefile).
set -euo pipefail
ver=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | awk '{print $4}' | grep -q online; then
  pg_lsclusters -h | grep -q "^$ver main" || pg_createcluster "$ver" main >/dev/null
  pg_ctlcluster "$ver" main start
fi
for i in $(seq 1 30); do
  su postgres -c "pg_isready -q" && break
  sleep 0.5
done
psql_() { su postgres -c "psql -v ON_ERROR_STOP=1 -qAt $*"; }
psql_ "-c \"SELECT 1 FROM pg_roles WHERE rolname='sandlot'\"" | grep -q 1 ||
  psql_ "-c \"CREATE ROLE sandlot LOGIN PASSWORD 'sandlot' CREATEROLE\""
psql_ "-c \"SELECT 1 FROM pg_database WHERE datname='sandlot_test'\"" | grep -q 1 ||
  psql_ "-c \"CREATE DATABASE sandlot_test OWNER sandlot\""
