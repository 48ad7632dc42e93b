#!/usr/bin/env bash
# Encodes the text-format seeds of the definition target (seeds/protobuf/NAME.txtpb, and the
# tools an executor or MCP server lists in NAME.listing.txtpb) into seeds/definition/NAME.pb:
# the format byte '0', the length-delimited AgentDefinition, then the ListToolsResponse.
# Needs protoc (Debian: apt-get install protobuf-compiler).
set -euo pipefail
cd "$(dirname "$0")"
proto=../../proto
for text in protobuf/*.txtpb; do
    case "$text" in *.listing.txtpb) continue ;; esac
    name=$(basename "$text" .txtpb)
    def=$(mktemp) listing=$(mktemp)
    protoc -I "$proto" -I /usr/include --encode=toolrouter.v1.AgentDefinition \
        toolrouter/v1/definition.proto <"$text" >"$def"
    : >"$listing"
    if [ -f "protobuf/$name.listing.txtpb" ]; then
        protoc -I "$proto" -I /usr/include --encode=toolrouter.v1.ListToolsResponse \
            toolrouter/v1/executor.proto <"protobuf/$name.listing.txtpb" >"$listing"
    fi
    python3 - "$def" "$listing" "definition/$name.pb" <<'PY'
import sys
body = open(sys.argv[1], 'rb').read()
n, prefix = len(body), bytearray()
while True:
    b, n = n & 0x7f, n >> 7
    prefix.append(b | (0x80 if n else 0))
    if not n:
        break
open(sys.argv[3], 'wb').write(b'0' + bytes(prefix) + body + open(sys.argv[2], 'rb').read())
PY
    rm -f "$def" "$listing"
    echo "seeds/definition/$name.pb"
done
