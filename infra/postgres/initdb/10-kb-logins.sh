#!/bin/bash
# First start of the compose stack's PostgreSQL (empty volume) only: create the two application
# logins with the passwords the app containers use. Migration 002 finds them (CREATE ROLE ... IF NOT
# EXISTS), sets their attributes and grants, and leaves the passwords alone.
# psql's :'var' quotes the passwords as literals, whatever characters they contain.
set -euo pipefail

: "${KB_SERVER_DB_PASSWORD:?KB_SERVER_DB_PASSWORD must be set}"
: "${KB_INGEST_DB_PASSWORD:?KB_INGEST_DB_PASSWORD must be set}"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v server_password="$KB_SERVER_DB_PASSWORD" -v ingest_password="$KB_INGEST_DB_PASSWORD" <<'SQL'
CREATE ROLE kb_server LOGIN NOINHERIT PASSWORD :'server_password';
CREATE ROLE kb_ingest LOGIN PASSWORD :'ingest_password';
SQL
