"""Helper of scripts/bench-peers.sh: registers the bench agent, checks every path with a real
gRPC client, writes the request bodies h2load sends, checks each h2load run, and renders the
results (table, ratios, JSON lines).

    bench_peers.py prepare TOOLROUTER_ADDR EXECUTOR_URL OUT_DIR MAX_CONCURRENCY NAME=ADDR...
    bench_peers.py check H2LOAD_OUTPUT EXPECTED_DATA_BYTES_PER_CALL
    bench_peers.py report RUNS.jsonl CONCURRENCY [JSON_OUT]

Uses the generated stubs of the Python client (PYTHONPATH=clients/python/src) and grpcio.
"""

import json
import re
import struct
import sys
from pathlib import Path

AGENT = "bench-peers"
TOOL = "customer_name"
ARGS = '{"customer_id":42}'
EXPECTED = '"Ada"'
PATHS = ("direct", "nginx", "haproxy", "toolrouter")
FORWARDERS = ("nginx", "haproxy")


def frame(message) -> bytes:
    """One uncompressed gRPC message: flag byte, big-endian length, the message."""
    body = message.SerializeToString()
    return struct.pack(">BI", 0, len(body)) + body


def prepare(toolrouter: str, executor_url: str, out: str, max_concurrency: int, paths: list[str]) -> None:
    import grpc
    from toolrouter_client.proto import (
        definition_pb2,
        executor_pb2,
        executor_pb2_grpc,
        registry_pb2,
        registry_pb2_grpc,
        router_pb2,
        router_pb2_grpc,
    )

    execute = executor_pb2.ExecuteRequest(tool=TOOL, arguments_json=ARGS)
    # The model's call of the flat `call_tool`: toolrouter parses these arguments, finds the
    # tool in the group, validates {"customer_id":42} against its schema and calls the executor.
    # No run and no tool_call_id: the plain path, exactly-once off.
    route = router_pb2.HandleToolCallRequest(
        agent=definition_pb2.AgentRef(agent_id=AGENT),
        call=router_pb2.ToolCall(
            tool_name="call_tool",
            arguments_json=json.dumps({"group": "crm", "tool": TOOL, "arguments": json.loads(ARGS)}),
        ),
    )
    expect = {}
    with grpc.insecure_channel(toolrouter) as ch:
        tool = definition_pb2.ToolDeclaration(
            name=TOOL,
            description="Look up the display name for a customer ID.",
            input_schema_json='{"type":"object","properties":{"customer_id":{"type":"integer",'
            '"description":"Numeric customer ID"}},"required":["customer_id"]}',
            idempotent=True,
        )
        source = definition_pb2.ToolSource(
            id="crm-tools",
            function=definition_pb2.FunctionSource(endpoint=executor_url, tools=[tool], max_concurrency=max_concurrency),
        )
        definition = definition_pb2.AgentDefinition(
            sources=[source],
            groups={"crm": definition_pb2.ToolGroup(description="Customer records", source_ids=["crm-tools"])},
        )
        registry_pb2_grpc.AgentRegistryStub(ch).CreateAgentVersion(
            registry_pb2.CreateAgentVersionRequest(agent_id=AGENT, definition=definition, make_default=True),
            timeout=30,
        )
        answer, call = router_pb2_grpc.RouterStub(ch).HandleToolCall.with_call(route, timeout=30)
        if (
            call.code() != grpc.StatusCode.OK
            or answer.WhichOneof("outcome") != "result"
            or answer.result.is_error
            or answer.result.content_json != EXPECTED
        ):
            sys.exit(f"bench-peers: toolrouter answered {call.code()} {answer} instead of the result {EXPECTED}")
        expect["toolrouter"] = len(frame(answer))
        print(f"bench-peers: toolrouter ({toolrouter}) answered {EXPECTED}, grpc-status 0")
    for name_addr in paths:
        name, addr = name_addr.split("=", 1)
        with grpc.insecure_channel(addr) as ch:
            got, call = executor_pb2_grpc.ToolExecutorStub(ch).Execute.with_call(execute, timeout=30)
            if call.code() != grpc.StatusCode.OK or got.is_error or got.content_json != EXPECTED:
                sys.exit(f"bench-peers: {name} ({addr}) answered {call.code()} {got} instead of {EXPECTED}")
            expect[name] = len(frame(got))
            print(f"bench-peers: {name} ({addr}) answered {EXPECTED}, grpc-status 0")
    Path(out, "execute.bin").write_bytes(frame(execute))
    Path(out, "route.bin").write_bytes(frame(route))
    for name, n in expect.items():
        Path(out, f"{name}.expect").write_text(f"{n}\n")


def parse_h2load(text: str) -> dict:
    m = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text, re.M)
    s = re.search(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text, re.M)
    d = re.search(r"^traffic: .*, \S+ \((\d+)\) data", text, re.M)
    f = re.search(r"^finished in ([\d.]+)(m?s)", text, re.M)
    if not (m and s and d and f):
        raise ValueError("unrecognised h2load output")
    secs = float(f.group(1)) / (1000 if f.group(2) == "ms" else 1)
    return {
        "done": int(m.group(3)),
        "succeeded": int(m.group(4)),
        "failed": int(m.group(5)),
        "errored": int(m.group(6)),
        "timeout": int(m.group(7)),
        "2xx": int(s.group(1)),
        "not_2xx": int(s.group(2)) + int(s.group(3)) + int(s.group(4)),
        "data": int(d.group(1)),
        "secs": secs,
    }


def check(output: str, expect_bytes: int) -> dict:
    """Fails unless every request succeeded with the expected response. A gRPC error arrives
    as HTTP 200 with grpc-status in the trailers and no message, which h2load counts as a
    success: so the DATA bytes received must be the expected response frame for every
    finished call. When a timed run stops, calls still in flight may have received their
    headers (counted as 2xx) and their message but not their trailers (not done): those may
    add one message each, so at most that many (a handful) errors could hide behind them."""
    text = Path(output).read_text()
    try:
        r = parse_h2load(text)
    except ValueError:
        sys.exit(f"bench-peers: unrecognised h2load output in {output}:\n{text}")
    problems = []
    if r["succeeded"] == 0:
        problems.append("no request succeeded")
    if r["failed"] or r["errored"] or r["timeout"]:
        problems.append(f"{r['failed']} failed, {r['errored']} errored, {r['timeout']} timeout")
    if r["not_2xx"]:
        problems.append(f"{r['not_2xx']} responses were not HTTP 2xx")
    unfinished = max(0, r["2xx"] - r["done"])
    low, high = r["succeeded"] * expect_bytes, (r["succeeded"] + unfinished) * expect_bytes
    if not low <= r["data"] <= high:
        problems.append(
            f"{r['data']} response bytes for {r['succeeded']} calls (+{unfinished} unfinished), not {expect_bytes} "
            "each: some calls did not get the expected message (a gRPC error has none)"
        )
    if problems:
        sys.exit(f"bench-peers: {output}: " + "; ".join(problems) + f"\n{text}")
    return r


def percentile(sorted_values: list[int], q: float) -> float:
    """Nearest-rank percentile."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, int(round(q * len(sorted_values) + 0.5)) - 1))
    return float(sorted_values[k])


def latencies(logs: list[str]) -> list[int]:
    values = []
    for log in logs:
        with open(log) as f:
            for line in f:
                parts = line.split("\t")
                if len(parts) >= 3 and parts[1] == "200":
                    values.append(int(parts[2]))
    values.sort()
    return values


def report(runs_file: str, concurrency: int, json_out: str | None) -> None:
    runs = [json.loads(line) for line in Path(runs_file).read_text().splitlines() if line.strip()]
    res = {}
    for name in PATHS:
        load = [r for r in runs if r["path"] == name and r["phase"] == "load"]
        seq = [r for r in runs if r["path"] == name and r["phase"] == "seq"]
        if not load:
            continue
        parsed = [check(r["out"], r["expect"]) for r in load]
        calls = sum(p["succeeded"] for p in parsed)
        secs = sum(p["secs"] for p in parsed)
        lat_load = latencies([r["log"] for r in load])
        lat_seq = latencies([r["log"] for r in seq])
        res[name] = {
            "rounds": [p["succeeded"] / p["secs"] for p in parsed],
            "calls": calls,
            "calls_per_s": calls / secs,
            "p50_us": percentile(lat_seq, 0.50),
            "p99_us": percentile(lat_seq, 0.99),
            "load_p50_us": percentile(lat_load, 0.50),
            "load_p99_us": percentile(lat_load, 0.99),
            "cpu_per_call_us": None if name == "direct" else sum(r["proxy_cpu_us"] for r in load) / calls,
            "executor_cpu_per_call_us": sum(r["executor_cpu_us"] for r in load) / calls,
        }

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)

    print()
    print(
        f"{'path':<11} {'calls/s':>9} {'p50 µs':>8} {'p99 µs':>8} {'p50 µs':>8} {'p99 µs':>8} "
        f"{'proxy CPU':>10} {'executor CPU':>13}"
    )
    print(
        f"{'':<11} {f'c={concurrency}':>9} {'c=1':>8} {'c=1':>8} {f'c={concurrency}':>8} {f'c={concurrency}':>8} "
        f"{'µs/call':>10} {'µs/call':>13}"
    )
    for name, r in res.items():
        print(
            f"{name:<11} {r['calls_per_s']:>9.0f} {r['p50_us']:>8.0f} {r['p99_us']:>8.0f} "
            f"{r['load_p50_us']:>8.0f} {r['load_p99_us']:>8.0f} "
            f"{fmt(r['cpu_per_call_us'], '.1f'):>10} {r['executor_cpu_per_call_us']:>13.1f}"
        )

    if any(len(r["rounds"]) > 1 for r in res.values()):
        print("calls/s by round (their spread shows the machine's other load): " + "; ".join(
            f"{name} " + " / ".join(f"{v:.0f}" for v in r["rounds"]) for name, r in res.items()
        ))

    lines = []

    def emit(figure, path, value, **extra):
        if value is None:
            return
        record = {"bench": "peers", "figure": figure, "path": path, **extra, "value": round(value, 2)}
        lines.append(json.dumps(record, separators=(",", ":")))

    for name, r in res.items():
        emit("calls_per_s", name, r["calls_per_s"], concurrency=concurrency)
        emit("p50_us", name, r["p50_us"], concurrency=1)
        emit("p99_us", name, r["p99_us"], concurrency=1)
        emit("p50_us", name, r["load_p50_us"], concurrency=concurrency)
        emit("p99_us", name, r["load_p99_us"], concurrency=concurrency)
        emit("cpu_per_call_us", name, r["cpu_per_call_us"], concurrency=concurrency)
        emit("executor_cpu_per_call_us", name, r["executor_cpu_per_call_us"], concurrency=concurrency)

    print()
    direct = res.get("direct")
    if direct:
        print("against direct (same run):")
        for name, r in res.items():
            if name == "direct":
                continue
            rate = r["calls_per_s"] / direct["calls_per_s"]
            added = r["p50_us"] - direct["p50_us"]
            print(
                f"  {name:<11} calls/s {rate:.2f}×, p50 at c=1 +{added:.0f} µs "
                f"(p99 +{r['p99_us'] - direct['p99_us']:.0f} µs)"
            )
            emit("calls_per_s_ratio", name, rate, vs="direct", concurrency=concurrency)
            emit("p50_added_us", name, added, vs="direct", concurrency=1)
    forwarders = [f for f in FORWARDERS if f in res]
    if forwarders and "toolrouter" in res:
        best = max(forwarders, key=lambda f: res[f]["calls_per_s"])
        f, t = res[best], res["toolrouter"]
        rate = t["calls_per_s"] / f["calls_per_s"]
        cpu = t["cpu_per_call_us"] / f["cpu_per_call_us"] if f["cpu_per_call_us"] else None
        fwd_added = f["p50_us"] - direct["p50_us"] if direct else None
        tr_added = t["p50_us"] - direct["p50_us"] if direct else None
        print(f"toolrouter against the fastest forwarder ({best}, same run):")
        print(f"  calls/s {rate:.2f}×, proxy CPU per call {fmt(cpu, '.2f')}×", end="")
        if direct:
            print(f", p50 hop at c=1 {tr_added:.0f} µs vs {fwd_added:.0f} µs")
        else:
            print()
        emit("calls_per_s_ratio", "toolrouter", rate, vs=best, concurrency=concurrency)
        emit("cpu_per_call_ratio", "toolrouter", cpu, vs=best, concurrency=concurrency)
    print()
    for line in lines:
        print(line)
    if json_out:
        with open(json_out, "a") as out:
            out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    cmd = sys.argv[1:2]
    if cmd == ["prepare"] and len(sys.argv) >= 7:
        prepare(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6:])
    elif cmd == ["check"] and len(sys.argv) == 4:
        check(sys.argv[2], int(sys.argv[3]))
    elif cmd == ["report"] and len(sys.argv) in (4, 5):
        report(sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) == 5 else None)
    else:
        sys.exit(__doc__)
