#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ for a bounded time each: scripts/fuzz.sh [SECONDS] [TARGET...]
# (default 60 s each, all targets). Installs cargo-fuzz if missing. Works on the stable
# toolchain: no sanitizer (`-s none`; the address sanitizer needs nightly), debug assertions
# on (`-a`: overflow checks), SanitizerCoverage instrumentation as usual. The mutation seed is
# fixed (-seed=1), so a run is reproducible up to timing. Exits non-zero on a crash, a hang
# (an input running over 10 s) or an out-of-memory, printing where the input was saved.
#
# Corpus: fuzz/seeds/TARGET (committed) is read; new inputs go to fuzz/corpus/TARGET
# (ignored by git, kept between runs). Crashes go to fuzz/artifacts/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(search definition arguments)

# The fuzz crate has its own target directory (fuzz/target); a CARGO_TARGET_DIR meant for the
# main crate would mix instrumented and plain builds.
unset CARGO_TARGET_DIR
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --version 0.13.2 --locked
fi
flags=(--sanitizer none --debug-assertions)
cargo fuzz build "${flags[@]}"

declare -A dict=([search]=fuzz/dict/search.dict [definition]=fuzz/dict/json.dict [arguments]=fuzz/dict/json.dict)
declare -A max_len=([search]=4096 [definition]=16384 [arguments]=4096)
status=0
for target in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
    before=$(ls "fuzz/artifacts/$target" | wc -l)
    log="fuzz/artifacts/$target.log"
    echo "== fuzz $target for ${seconds}s"
    set +e
    cargo fuzz run "${flags[@]}" "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
        -max_total_time="$seconds" -seed=1 -timeout=10 -rss_limit_mb=2048 \
        -max_len="${max_len[$target]}" -dict="${dict[$target]}" -print_final_stats=1 \
        >"$log" 2>&1
    rc=$?
    set -e
    grep -E '^(#[0-9]+ +DONE|Done [0-9]+ runs)|stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$log" || true
    if [ $rc -ne 0 ]; then
        status=1
        echo "!! fuzz target $target failed (exit $rc); its log: $log" >&2
        grep -E 'panicked at|ERROR: libFuzzer|SUMMARY|Test unit written to' "$log" | head -20 >&2 || true
        if [ "$(ls "fuzz/artifacts/$target" | wc -l)" -gt "$before" ]; then
            for input in $(ls -t "fuzz/artifacts/$target" | head -n $(( $(ls "fuzz/artifacts/$target" | wc -l) - before ))); do
                echo "!! input saved: fuzz/artifacts/$target/$input" >&2
                echo "   reproduce: cargo fuzz run ${flags[*]} $target fuzz/artifacts/$target/$input" >&2
                echo "   minimize:  cargo fuzz tmin ${flags[*]} $target fuzz/artifacts/$target/$input" >&2
            done
        fi
    fi
done
exit $status
