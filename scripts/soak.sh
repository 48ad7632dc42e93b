#!/usr/bin/env bash
# Chaos soak (issue 15 item 11): replicas A and B on one PostgreSQL, C on SQLite, fake
# executors, mixed gRPC and MCP traffic with duplicate tool_call_ids, executor crashes,
# kill -9 and SIGTERM of replicas, PostgreSQL restarts, slow and malformed clients. Prints the
# report (calls, double executions, lost records, stuck claims, peak RSS, p99) and a JSON line;
# exits 1 on any double execution, lost record, stuck claim, panic, replica exiting by itself
# or call in flight at SIGTERM left unanswered.
#
#   scripts/soak.sh [--duration SECS] [--release] [--seed N] [--concurrency N]
#                   [--chaos-every N] [--json FILE]
#
# PostgreSQL: as root, its own throw-away cluster on 127.0.0.1:$SOAK_PG_PORT (55433, not the
# tests' 55432) through scripts/postgres-for-tests.sh, a fresh database per run, stopped at
# the end. Or SOAK_POSTGRES_URL names a server (then PostgreSQL restarts are part of the
# chaos only if SOAK_PG_STOP_CMD and SOAK_PG_START_CMD are given). SOAK_BASE_PORT (21100):
# the replicas use 21100-21105, the executors 21120-21121. Replica logs are kept (and the
# directory printed) only when the run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=150
PROFILE=ci
SEED="$(date +%s)"
CONCURRENCY=24
CHAOS_EVERY=12
JSON=""
while [ $# -gt 0 ]; do
    case "$1" in
        --duration) DURATION="$2"; shift 2 ;;
        --release) PROFILE=release; shift ;;
        --seed) SEED="$2"; shift 2 ;;
        --concurrency) CONCURRENCY="$2"; shift 2 ;;
        --chaos-every) CHAOS_EVERY="$2"; shift 2 ;;
        --json) JSON="$2"; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "soak: unknown argument $1" >&2; exit 2 ;;
    esac
done

log() { echo "soak: $*" >&2; }

if [ "$PROFILE" = release ]; then
    cargo build --release --locked --bin toolrouter --bin toolrouter-soak
else
    cargo build --profile ci --locked --bin toolrouter --bin toolrouter-soak
fi
BIN="${CARGO_TARGET_DIR:-target}/$PROFILE"

WORK="$(mktemp -d /tmp/toolrouter-soak.XXXXXX)"
mkdir -p "$WORK/pids"
HARNESS_PID=""
OWN_PG=""
PG_PORT="${SOAK_PG_PORT:-55433}"
PG_DIR="/tmp/toolrouter-pg-$PG_PORT"

# Kills what this script started, also when the harness itself was killed: the replicas'
# pids are in $WORK/pids (checked to still be toolrouter processes).
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$HARNESS_PID" ] && kill -0 "$HARNESS_PID" 2>/dev/null; then
        kill -TERM "$HARNESS_PID" 2>/dev/null || true
        sleep 1
        kill -KILL "$HARNESS_PID" 2>/dev/null || true
    fi
    for f in "$WORK"/pids/*.pid; do
        [ -f "$f" ] || continue
        local pid
        pid="$(cat "$f")"
        if grep -q toolrouter "/proc/$pid/cmdline" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    if [ -n "$OWN_PG" ]; then
        TOOLROUTER_TEST_PG_PORT="$PG_PORT" TOOLROUTER_TEST_PG_DIR="$PG_DIR" scripts/postgres-for-tests.sh stop || true
    fi
    if [ "$rc" -eq 0 ]; then
        rm -rf "$WORK"
    else
        log "FAILED (exit $rc); replica logs kept in $WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

PG_ARGS=()
if [ -n "${SOAK_POSTGRES_URL:-}" ]; then
    PG_URL="$SOAK_POSTGRES_URL"
    if [ -n "${SOAK_PG_STOP_CMD:-}" ] && [ -n "${SOAK_PG_START_CMD:-}" ]; then
        PG_ARGS=(--pg-stop-cmd "$SOAK_PG_STOP_CMD" --pg-start-cmd "$SOAK_PG_START_CMD")
    fi
elif [ "$(id -u)" -eq 0 ]; then
    OWN_PG=1
    eval "$(TOOLROUTER_TEST_PG_PORT="$PG_PORT" TOOLROUTER_TEST_PG_DIR="$PG_DIR" scripts/postgres-for-tests.sh)"
    PG_BIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
    psql_admin() { runuser -u postgres -- "$PG_BIN/psql" -h "$PG_DIR" -p "$PG_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qAt "$@"; }
    psql_admin -c "DROP DATABASE IF EXISTS toolrouter_soak WITH (FORCE)" >&2
    psql_admin -c "CREATE DATABASE toolrouter_soak OWNER toolrouter" >&2
    PG_URL="${TOOLROUTER_TEST_POSTGRES_URL%/*}/toolrouter_soak"
    PG_ARGS=(--pg-stop-cmd "runuser -u postgres -- $PG_BIN/pg_ctl -D $PG_DIR -m fast -w stop"
             --pg-start-cmd "runuser -u postgres -- $PG_BIN/pg_ctl -D $PG_DIR -l $PG_DIR/server.log -w -t 60 start")
else
    log "needs root (for its own PostgreSQL on 127.0.0.1:$PG_PORT) or SOAK_POSTGRES_URL"
    exit 2
fi

HARNESS_ARGS=(--toolrouter "$BIN/toolrouter" --work "$WORK" --pg-url "$PG_URL" "${PG_ARGS[@]}"
              --duration "$DURATION" --seed "$SEED" --concurrency "$CONCURRENCY" --chaos-every "$CHAOS_EVERY"
              --base-port "${SOAK_BASE_PORT:-21100}" --lease-secs 15)
if [ -n "$JSON" ]; then
    HARNESS_ARGS+=(--json "$JSON")
fi
log "work dir $WORK, seed $SEED, $DURATION s of traffic"
"$BIN/toolrouter-soak" "${HARNESS_ARGS[@]}" &
HARNESS_PID=$!
rc=0
wait "$HARNESS_PID" || rc=$?
HARNESS_PID=""
exit "$rc"
