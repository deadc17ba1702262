#!/bin/sh
# One-shot (service temporal-schema, image temporalio/admin-tools): create the `temporal` and
# `temporal_visibility` databases and bring both schemas to the version this admin-tools image
# ships (postgres12 plugin). Safe to re-run on every `docker compose up`: an existing database is
# kept, `setup-schema -v 0.0` does not reset an already versioned database, and `update-schema`
# applies only the migrations newer than the stored version. Server upgrades therefore go:
# bump the server and admin-tools tags together, `docker compose up`.
#
# temporal-sql-tool reads the password from SQL_PASSWORD (the server reads POSTGRES_PWD).
set -eu

: "${POSTGRES_SEEDS:?POSTGRES_SEEDS is required}"
: "${POSTGRES_USER:?POSTGRES_USER is required}"
: "${SQL_PASSWORD:?SQL_PASSWORD is required}"
PORT=${DB_PORT:-5432}
SCHEMA_DIR=/etc/temporal/schema/postgresql/v12

sql_tool() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$PORT" -u "$POSTGRES_USER" "$@"
}

# `create` fails on an existing database; that one outcome is success here, anything else
# (wrong password, unreachable host) stops the setup with the tool's own message.
create_database() {
  if output=$(sql_tool --db "$1" create 2>&1); then
    echo "created database $1"
  elif printf '%s\n' "$output" | grep -qi 'already exists'; then
    echo "database $1 already exists"
  else
    printf '%s\n' "$output" >&2
    return 1
  fi
}

setup_database() { # database, schema (temporal | visibility)
  create_database "$1"
  sql_tool --db "$1" setup-schema -v 0.0
  sql_tool --db "$1" update-schema -d "$SCHEMA_DIR/$2/versioned"
}

setup_database temporal temporal
setup_database temporal_visibility visibility
echo "temporal schemas are up to date"
