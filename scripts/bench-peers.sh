#!/usr/bin/env bash
# toolrouter side by side with the proxies people know (issue 19 item 5): the same executor
# (the demo CRM executor, `toolrouter demo-executor`) called directly, through nginx
# (grpc_pass), through HAProxy (HTTP/2 both sides) and through toolrouter, with h2load, in
# one run. nginx and HAProxy forward the executor's own `ToolExecutor/Execute` request;
# toolrouter gets the model's call, `Router/HandleToolCall` of `call_tool` (it parses the
# arguments JSON, validates them against the tool's schema, resolves the agent's version,
# records metrics and traces, and sends a new `Execute` upstream).
#
#   scripts/bench-peers.sh [--duration SECS (10)] [--connections C (4)] [--concurrency N (64)]
#                          [--latency-duration SECS (3)] [--warmup SECS (1)] [--rounds R (2)]
#                          [--json FILE]
#
# Per path: a warm-up, then --duration seconds of load with N requests in flight over C
# connections (calls/s, p50/p99 under load, CPU per call of the proxy's processes and of
# the executor, from /proc), then --latency-duration seconds of one request at a time (p50/p99
# of the hop itself). Both are split into --rounds rounds, the paths taking turns, so that
# other load on the machine is shared out between them. Prints a table, ratios against direct
# and against the fastest forwarder, and every figure as one JSON line (also appended to
# --json FILE).
#
# Before the load, every path answers one call from a real gRPC client (grpcio and the stubs
# of clients/python): grpc-status 0 and the expected result. During the load, h2load must
# count no failed, errored or timed-out request, and the response bytes must be exactly the
# expected message for every call (a gRPC error has no message), else the script exits 1.
#
# No exactly-once leg: h2load sends the same request body every time, so a tool_call_id
# would be the same for every call and all but the first would be answered from the record
# without running the tool. `cargo bench --bench proxy` measures exactly-once with distinct
# ids.
#
# Installs nginx-light, haproxy and nghttp2-client from Debian when missing (needs root for
# that). Builds `toolrouter` (release). Binds 127.0.0.1 only, keeps everything under a
# mktemp directory and stops every process it started (by pid), also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=10 connections=4 concurrency=64 latency_duration=3 warmup=1 rounds=2 json=""
usage() { sed -n '/^#   scripts/,/^#$/p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --duration) duration=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        --concurrency) concurrency=$2; shift 2 ;;
        --latency-duration) latency_duration=$2; shift 2 ;;
        --warmup) warmup=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --json) json=$2; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "bench-peers: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done
for v in "$duration" "$connections" "$concurrency" "$latency_duration" "$rounds"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "bench-peers: $v is not a positive whole number" >&2; exit 2; }
done
[[ $warmup =~ ^[0-9]+$ ]] || { echo "bench-peers: --warmup $warmup is not a whole number" >&2; exit 2; }
if [ $((concurrency % connections)) -ne 0 ]; then
    echo "bench-peers: --concurrency ($concurrency) must be a multiple of --connections ($connections)" >&2
    exit 2
fi
streams=$((concurrency / connections))
# Each round's share of the load and of the one-at-a-time phase, in milliseconds.
load_ms=$((duration * 1000 / rounds))
seq_ms=$((latency_duration * 1000 / rounds))
started=$(date +%s)

missing=()
command -v nginx > /dev/null || missing+=(nginx-light)
command -v haproxy > /dev/null || missing+=(haproxy)
command -v h2load > /dev/null || missing+=(nghttp2-client)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "bench-peers: needs ${missing[*]} (Debian packages; run as root to have them installed)" >&2
        exit 1
    fi
    echo "bench-peers: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q "${missing[@]}" > /dev/null ||
        { apt-get update -q > /dev/null && apt-get install -y -q "${missing[@]}" > /dev/null; }
fi
export PYTHONPATH="$PWD/clients/python/src${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c 'import grpc, toolrouter_client.proto' 2> /dev/null; then
    echo "bench-peers: python3 needs grpcio and protobuf for the stubs of clients/python (pip install 'grpcio>=1.85.1' 'protobuf>=7.35.1,<8')" >&2
    exit 1
fi

cargo build --release --locked --bin toolrouter
bin="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release/toolrouter"

work=$(mktemp -d "${TMPDIR:-/tmp}/toolrouter-bench-peers.XXXXXX")
pids=()
cleanup() {
    local rc=$? pid
    # Only the script itself cleans up, never a subshell that inherited the trap.
    [ "$BASHPID" = "$$" ] || return 0
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
    for _ in $(seq 50); do
        local alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2> /dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2> /dev/null || true; done
    wait 2> /dev/null || true
    if [ "$rc" -ne 0 ]; then
        for log in "$work"/*.log "$work"/nginx/error.log; do
            [ -s "$log" ] || continue
            echo "--- last lines of $log" >&2
            tail -n 20 "$log" >&2
        done
    fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# $1 distinct free loopback ports.
ports() {
    python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}
# Waits until something accepts connections on 127.0.0.1:$1 while process $2 lives.
wait_port() {
    for _ in $(seq 200); do
        kill -0 "$2" 2> /dev/null || { echo "bench-peers: process $2 (for port $1) exited" >&2; return 1; }
        (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null && return 0
        sleep 0.05
    done
    echo "bench-peers: nothing listens on 127.0.0.1:$1" >&2
    return 1
}
cores=$(nproc)
tick_us=$((1000000 / $(getconf CLK_TCK)))
read -r exec_port nginx_port haproxy_port router_port router_http_port <<< "$(ports 5)"

"$bin" demo-executor --addr "127.0.0.1:$exec_port" > "$work/executor.log" 2>&1 &
exec_pid=$!
pids+=("$exec_pid")

# nginx: one worker per core; upstream connections kept alive (nginx's gRPC proxy sends one
# request at a time on each), and no request cap per connection on either side.
mkdir -p "$work/nginx"
nginx_user=""
if [ "$(id -u)" -eq 0 ]; then nginx_user="user nobody $(id -gn nobody 2> /dev/null || echo nogroup);"; fi
cat > "$work/nginx.conf" << EOF
$nginx_user
worker_processes $cores;
daemon off;
master_process on;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    keepalive_requests 100000000;
    upstream executor {
        server 127.0.0.1:$exec_port;
        keepalive $((concurrency * 2));
        keepalive_requests 100000000;
    }
    server {
        listen 127.0.0.1:$nginx_port http2;
        http2_max_concurrent_streams 1024;
        location / { grpc_pass grpc://executor; }
    }
}
EOF
nginx -e "$work/nginx/error.log" -p "$work/nginx" -c "$work/nginx.conf" > "$work/nginx.log" 2>&1 &
nginx_pid=$!
pids+=("$nginx_pid")

# HAProxy: one thread per core, HTTP/2 on both sides, idle server connections shared.
cat > "$work/haproxy.cfg" << EOF
global
    nbthread $cores
    maxconn 4096
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    http-reuse always
frontend grpc
    bind 127.0.0.1:$haproxy_port proto h2
    default_backend executor
backend executor
    server e1 127.0.0.1:$exec_port proto h2
EOF
haproxy -f "$work/haproxy.cfg" -db > "$work/haproxy.log" 2>&1 &
haproxy_pid=$!
pids+=("$haproxy_pid")

# toolrouter: defaults, except the per-tenant rate limit (10,000 calls/s, burst 20,000 by
# default) is raised out of reach: the limiter still runs on every call, but refuses none.
"$bin" serve --grpc-addr "127.0.0.1:$router_port" --http-addr "127.0.0.1:$router_http_port" \
    --store "sqlite://$work/store.db" --rate-limit-rps 1000000000 --rate-limit-burst 1000000000 > "$work/toolrouter.log" 2>&1 &
router_pid=$!
pids+=("$router_pid")

wait_port "$exec_port" "$exec_pid"
wait_port "$nginx_port" "$nginx_pid"
wait_port "$haproxy_port" "$haproxy_pid"
wait_port "$router_port" "$router_pid"
python3 scripts/bench_peers.py prepare "127.0.0.1:$router_port" "http://127.0.0.1:$exec_port" "$work" \
    $((concurrency * 2)) "direct=127.0.0.1:$exec_port" "nginx=127.0.0.1:$nginx_port" "haproxy=127.0.0.1:$haproxy_port"

# User + system CPU time (µs) used so far by process $1 and its children (nginx's workers).
cpu_us() {
    local total=0 pid stat f
    for pid in "$1" $(pgrep -P "$1" || true); do
        stat=$(< "/proc/$pid/stat") || continue
        read -r -a f <<< "${stat##*) }"
        total=$((total + (f[11] + f[12]) * tick_us))
    done
    echo "$total"
}

declare -A port_of=([direct]=$exec_port [nginx]=$nginx_port [haproxy]=$haproxy_port [toolrouter]=$router_port)
declare -A pid_of=([direct]=$exec_pid [nginx]=$nginx_pid [haproxy]=$haproxy_pid [toolrouter]=$router_pid)
h2() { # path-name extra h2load options...
    local name=$1 url body
    shift
    if [ "$name" = toolrouter ]; then
        url="http://127.0.0.1:${port_of[$name]}/toolrouter.v1.Router/HandleToolCall" body="$work/route.bin"
    else
        url="http://127.0.0.1:${port_of[$name]}/toolrouter.v1.ToolExecutor/Execute" body="$work/execute.bin"
    fi
    h2load -d "$body" -H 'content-type: application/grpc' -H 'te: trailers' "$@" "$url"
}
runs="$work/runs.jsonl"
measure() { # path-name round
    local name=$1 round=$2 out="$work/$1.$2" proxy0 exec0 proxy1 exec1 expect
    expect=$(< "$work/$name.expect")
    if [ "$round" = 1 ] && [ "$warmup" -gt 0 ]; then
        h2 "$name" -D "$warmup" -c "$connections" -m "$streams" > "$out.warmup.txt"
        python3 scripts/bench_peers.py check "$out.warmup.txt" "$expect"
    fi
    proxy0=$(cpu_us "${pid_of[$name]}") exec0=$(cpu_us "$exec_pid")
    h2 "$name" -D "${load_ms}ms" -c "$connections" -m "$streams" --log-file "$out.load.tsv" > "$out.load.txt"
    proxy1=$(cpu_us "${pid_of[$name]}") exec1=$(cpu_us "$exec_pid")
    python3 scripts/bench_peers.py check "$out.load.txt" "$expect"
    printf '{"path":"%s","phase":"load","round":%s,"out":"%s","log":"%s","expect":%s,"proxy_cpu_us":%s,"executor_cpu_us":%s}\n' \
        "$name" "$round" "$out.load.txt" "$out.load.tsv" "$expect" $((proxy1 - proxy0)) $((exec1 - exec0)) >> "$runs"
    h2 "$name" -D "${seq_ms}ms" -c 1 -m 1 --log-file "$out.seq.tsv" > "$out.seq.txt"
    python3 scripts/bench_peers.py check "$out.seq.txt" "$expect"
    printf '{"path":"%s","phase":"seq","round":%s,"out":"%s","log":"%s","expect":%s}\n' \
        "$name" "$round" "$out.seq.txt" "$out.seq.tsv" "$expect" >> "$runs"
}

echo "bench-peers: $(date -u +%FT%TZ), $cores cores, $(uname -r); per path ${duration} s at $concurrency in flight" \
    "($connections connections × $streams streams) and ${latency_duration} s one at a time, in $rounds rounds;" \
    "$(h2load --version | head -n 1), $(nginx -v 2>&1 | sed 's/.*: //'), $(haproxy -v | head -n 1 | cut -d' ' -f1-3)"
echo "bench-peers: toolrouter plain path (HandleToolCall of call_tool, no run, no tool_call_id); no exactly-once leg:" \
    "h2load repeats one body, so one tool_call_id would be deduplicated after the first call (see cargo bench --bench proxy)"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
order=(direct nginx haproxy toolrouter)
for round in $(seq "$rounds"); do
    # Rotate the order each round, so no path is always first or last.
    for i in 0 1 2 3; do
        name=${order[$(((i + round - 1) % 4))]}
        echo "bench-peers: round $round/$rounds: $name"
        measure "$name" "$round"
    done
done
python3 scripts/bench_peers.py report "$runs" "$concurrency" "$json"
echo
echo "(c=N: N requests in flight. proxy CPU: user + system time of nginx's workers, HAProxy or toolrouter" \
    "during the load, per call; executor CPU: the demo executor's, per call: the same request on every path, its" \
    "cost depending on how the proxy spreads calls over upstream connections - nginx uses one per call in flight.)"
echo "bench-peers: done in $(($(date +%s) - started)) s; load average before the paths $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)"
