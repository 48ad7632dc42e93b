#!/usr/bin/env bash
# Builds the `toolrouter` wheel (pyproject.toml: maturin, bindings = "bin") and checks that it
# works without cargo: installed into a fresh venv, its `toolrouter serve` starts and answers
# /readyz. Prints last a directory holding only the wheel's `toolrouter` (the client tests put it
# first on PATH; the venv's own bin would also shadow python3).
#
#   scripts/wheel.sh [--profile ci|release] [--out DIR] [--venv DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
profile=ci out=dist venv=${TMPDIR:-/tmp}/toolrouter-wheel-venv
while [ $# -gt 0 ]; do
    case $1 in
        --profile) profile=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --venv) venv=$2; shift 2 ;;
        *) echo "usage: $0 [--profile ci|release] [--out DIR] [--venv DIR]" >&2; exit 2 ;;
    esac
done
MATURIN_VERSION=1.16.0
tools=${XDG_CACHE_HOME:-$HOME/.cache}/toolrouter/maturin-$MATURIN_VERSION
if ! [ -x "$tools/bin/maturin" ]; then
    python3 -m venv "$tools"
    "$tools/bin/pip" install -q --disable-pip-version-check "maturin==$MATURIN_VERSION"
fi
rm -f "$out"/toolrouter-*.whl
if [ "$profile" = release ]; then
    "$tools/bin/maturin" build --release --out "$out" >&2
else
    "$tools/bin/maturin" build --profile "$profile" --out "$out" >&2
fi
wheel=$(ls "$out"/toolrouter-*.whl)
echo "built $wheel ($(du -h "$wheel" | cut -f1))" >&2

# A fresh venv with nothing but the wheel; PATH without cargo.
rm -rf "$venv" && python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "$wheel"
bin=$venv/bin/toolrouter
log=$(mktemp)
env -i PATH="$venv/bin:/usr/bin:/bin" HOME="$HOME" "$bin" serve --grpc-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 --store sqlite::memory: >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
http=
for _ in $(seq 100); do
    http=$(sed -n 's/^toolrouter listening: grpc=[^ ]* http=\([^ ]*\).*/\1/p' "$log")
    [ -n "$http" ] && break
    kill -0 $pid 2>/dev/null || { cat "$log" >&2; echo "the wheel's toolrouter exited" >&2; exit 1; }
    sleep 0.1
done
[ -n "$http" ] || { cat "$log" >&2; echo "the wheel's toolrouter did not start" >&2; exit 1; }
ready=$(python3 -c "import urllib.request,sys; print(urllib.request.urlopen('http://$http/readyz', timeout=5).status)")
[ "$ready" = 200 ] || { echo "/readyz answered $ready" >&2; exit 1; }
kill -TERM $pid && wait $pid || true
trap - EXIT
echo "the wheel's toolrouter serve answered /readyz 200 on $http" >&2
mkdir -p "$venv/toolrouter-only"
ln -sf "$bin" "$venv/toolrouter-only/toolrouter"
echo "$venv/toolrouter-only"
