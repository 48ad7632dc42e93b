#!/usr/bin/env bash
# A throw-away PostgreSQL server for the store and replica tests (tests/store_suite.rs,
# tests/replicas.rs). Run as root on a Debian machine; safe to run again (it reuses the
# cluster, starting it if it is stopped). Prints one line on stdout:
#
#   export TOOLROUTER_TEST_POSTGRES_URL=postgres://toolrouter:…@127.0.0.1:55432/toolrouter
#
# so that `eval "$(scripts/postgres-for-tests.sh)"` sets the variable. Everything else goes
# to stderr. `scripts/postgres-for-tests.sh stop` stops the server (the data stays).
#
# Settings (environment): TOOLROUTER_TEST_PG_PORT (55432), TOOLROUTER_TEST_PG_DIR
# (/tmp/toolrouter-pg-$PORT). The cluster listens on 127.0.0.1 only, trades durability for
# speed (fsync off) and is for tests only. Password authentication uses md5, not SCRAM: the
# 4096 PBKDF2 rounds of SCRAM cost ~0.1-0.2 s per connection in the unoptimised test builds.
# The role can create databases: the tests make one (toolrouter_test) and a schema per test.
set -euo pipefail

PORT="${TOOLROUTER_TEST_PG_PORT:-55432}"
DATA="${TOOLROUTER_TEST_PG_DIR:-/tmp/toolrouter-pg-$PORT}"
ROLE=toolrouter
PASSWORD=toolrouter-test
DATABASE=toolrouter

log() { echo "postgres-for-tests: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
    log "run me as root (I install packages and run the server as the postgres user)"
    exit 1
fi

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true; }
as_postgres() { runuser -u postgres -- "$@"; }

if [ "${1:-}" = "stop" ]; then
    BIN="$(pg_bin)"
    if [ -n "$BIN" ] && [ -f "$DATA/PG_VERSION" ]; then
        as_postgres "$BIN/pg_ctl" -D "$DATA" -m fast stop >&2 || true
    fi
    exit 0
fi

# 1. The server binaries, from Debian's packages, without the default cluster on :5432.
if [ -z "$(pg_bin)" ]; then
    log "installing PostgreSQL from the Debian packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    # postgresql-common first, told not to create (and start) the default cluster on :5432.
    apt-get install -y -qq --no-install-recommends postgresql-common >&2
    sed -ri 's/^#? *(create_main_cluster) .*$/\1 = false/' /etc/postgresql-common/createcluster.conf
    apt-get install -y -qq --no-install-recommends postgresql >&2
fi
BIN="$(pg_bin)"
if [ -z "$BIN" ]; then
    log "no PostgreSQL binaries under /usr/lib/postgresql after installing"
    exit 1
fi

# 2. A cluster in $DATA, owned by postgres.
if [ ! -f "$DATA/PG_VERSION" ]; then
    if [ -e "$DATA" ] && [ -n "$(ls -A "$DATA" 2>/dev/null)" ]; then
        log "$DATA exists and is not a PostgreSQL cluster; remove it or set TOOLROUTER_TEST_PG_DIR"
        exit 1
    fi
    log "creating a cluster in $DATA"
    mkdir -p "$DATA"
    chown postgres:postgres "$DATA"
    chmod 700 "$DATA"
    as_postgres "$BIN/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=md5 \
        --encoding=UTF8 --locale=C.UTF-8 >&2
    cat >> "$DATA/postgresql.conf" <<EOF

# postgres-for-tests.sh: loopback only, fast, for tests.
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DATA'
max_connections = 200
password_encryption = md5
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
fi

# 3. The server, on 127.0.0.1:$PORT.
if ! as_postgres "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    log "starting the server on 127.0.0.1:$PORT"
    as_postgres "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w -t 60 start >&2
fi

# 4. The role (allowed to create the tests' databases) and its database.
psql_admin() { as_postgres "$BIN/psql" -h "$DATA" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qAt "$@"; }
if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$ROLE'")" != "1" ]; then
    psql_admin -c "CREATE ROLE $ROLE LOGIN CREATEDB PASSWORD '$PASSWORD'" >&2
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'")" != "1" ]; then
    psql_admin -c "CREATE DATABASE $DATABASE OWNER $ROLE" >&2
fi

log "ready (log: $DATA/server.log)"
echo "export TOOLROUTER_TEST_POSTGRES_URL=postgres://$ROLE:$PASSWORD@127.0.0.1:$PORT/$DATABASE"
