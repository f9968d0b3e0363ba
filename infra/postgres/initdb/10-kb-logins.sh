#!/bin/bash
# First start of the compose stack's PostgreSQL (empty volume) only: create the application logins
# with the passwords the app containers use. Migrations 002 and 010 find them (CREATE ROLE ... IF NOT
# EXISTS), set their attributes and grants, and leave the passwords alone. The server's four reader
# logins (kb_server_<role>, one per reader role) share the kb_server password: the server derives them
# from its own connection URL.
# psql's :'var' quotes the passwords as literals, whatever characters they contain.
set -euo pipefail

: "${KB_SERVER_DB_PASSWORD:?KB_SERVER_DB_PASSWORD must be set}"
: "${KB_INGEST_DB_PASSWORD:?KB_INGEST_DB_PASSWORD must be set}"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v server_password="$KB_SERVER_DB_PASSWORD" -v ingest_password="$KB_INGEST_DB_PASSWORD" <<'SQL'
CREATE ROLE kb_server LOGIN NOINHERIT PASSWORD :'server_password';
CREATE ROLE kb_server_demo_readonly LOGIN NOINHERIT PASSWORD :'server_password';
CREATE ROLE kb_server_support_agent LOGIN NOINHERIT PASSWORD :'server_password';
CREATE ROLE kb_server_analyst LOGIN NOINHERIT PASSWORD :'server_password';
CREATE ROLE kb_server_compliance_officer LOGIN NOINHERIT PASSWORD :'server_password';
CREATE ROLE kb_ingest LOGIN PASSWORD :'ingest_password';
SQL
