#!/usr/bin/env bash
# The proto as a product (issue 20): buf lint (STANDARD, exceptions in buf.yaml) and a
# breaking-change check against the previous release tag, with the buf pinned in
# scripts/buf/package-lock.json (npm @bufbuild/buf; installed here when missing).
#
#   scripts/proto-check.sh            # lint, then breaking against the newest v* tag behind HEAD
#   scripts/proto-check.sh v0.1.0     # breaking against that tag
set -euo pipefail
cd "$(dirname "$0")/.."
buf=scripts/buf/node_modules/.bin/buf
[ -x "$buf" ] || npm ci --prefix scripts/buf --no-audit --no-fund --loglevel=error
"$buf" --version

"$buf" lint
echo "buf lint: ok"

# The previous release: the newest v* tag reachable from HEAD. A clone made without tags still
# has v0.1.0's commit (the first release, d5e3fb9) in its history, so it compares with that.
against=${1:-$(git describe --tags --abbrev=0 --match 'v[0-9]*' HEAD 2>/dev/null || true)}
if [ -n "$against" ]; then
    input=".git#tag=$against,subdir=proto"
else
    against=d5e3fb9
    input=".git#ref=d5e3fb9e81fb719c395b12e2d3b355a91659fdee,subdir=proto"
fi
# subdir=proto: releases before buf.yaml existed keep their protos under proto/.
"$buf" breaking --against "$input"
echo "buf breaking against $against: ok"
