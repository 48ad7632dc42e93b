#!/bin/sh
# Creates placeholder sources for every target of ./Cargo.toml that has no file yet, so that
# `cargo build` can compile the dependencies from the manifest and lock file alone. The
# Dockerfile runs it in a layer that only changes when Cargo.toml, Cargo.lock, build.rs or
# proto/ change; the real sources are copied over the stubs afterwards.
set -eu

stub() { # stub KIND PATH
    [ -e "$2" ] && return 0
    mkdir -p "$(dirname "$2")"
    if [ "$1" = lib ]; then : >"$2"; else echo 'fn main() {}' >"$2"; fi
}

stub lib src/lib.rs
stub bin src/main.rs

# One "KIND PATH" line per declared target; a target without `path` gets Cargo's default.
awk '
function flush() {
    if (kind == "") return
    p = path
    if (p == "") {
        if (kind == "lib") p = "src/lib.rs"
        else if (kind == "bin") p = "src/bin/" name ".rs"
        else if (kind == "bench") p = "benches/" name ".rs"
        else if (kind == "test") p = "tests/" name ".rs"
        else if (kind == "example") p = "examples/" name ".rs"
    }
    print kind, p
    kind = ""; name = ""; path = ""
}
/^[[:space:]]*\[/ {
    flush()
    if (match($0, /^[[:space:]]*\[\[(bin|bench|test|example)\]\]/)) {
        kind = $0; gsub(/[][[:space:]]/, "", kind)
    } else if ($0 ~ /^[[:space:]]*\[lib\]/) {
        kind = "lib"
    }
    next
}
kind != "" && /^[[:space:]]*name[[:space:]]*=/ { v = $0; sub(/^[^=]*=[[:space:]]*"/, "", v); sub(/".*/, "", v); name = v }
kind != "" && /^[[:space:]]*path[[:space:]]*=/ { v = $0; sub(/^[^=]*=[[:space:]]*"/, "", v); sub(/".*/, "", v); path = v }
END { flush() }
' Cargo.toml | while read -r kind path; do
    stub "$kind" "$path"
done
