"""README's host loops: the Python one runs against the real server with a scripted model, and
every language's loop in README is its example file's code, verbatim."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from toolrouter_client import Client

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "clients/python/examples"))
from host_loop import host_loop  # noqa: E402


def scripted_chat(messages, tools):
    """Turn 1: a refund (approval-gated) and the name lookup; turn 2: answers with the name."""
    assert any(t["function"]["name"] == "call_tool" for t in tools)
    if messages[-1]["role"] == "user":
        calls = [("refund", {"group": "crm", "tool": "refund_payment", "arguments": {"customer_id": 42, "amount": 5}}),
                 ("name", {"group": "crm", "tool": "customer_name", "arguments": {"customer_id": 42}})]
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "call_tool", "arguments": json.dumps(a)}} for i, a in calls]}
    answers = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert set(answers) == {"refund", "name"}, answers  # every call got its result before the next request
    return {"role": "assistant", "content": answers["name"]}


def test_the_python_host_loop_answers_ada_after_the_approved_refund(server, agent, run_id):
    asked = []
    with Client(server.grpc) as client:
        answer = host_loop(client, agent, run_id, scripted_chat, lambda d: asked.append(d.tool) or True, "Refund 42, then their name?")
        assert answer == "Ada"
        assert asked == ["refund_payment"]
        [record] = client.list_deferred(agent, run_id, state="resolved")
        assert record.resolution == "approved" and record.result.content["status"] == "done"


def test_a_denied_approval_reaches_the_model_and_never_runs(server, agent, run_id):
    with Client(server.grpc) as client:
        assert host_loop(client, agent, run_id, scripted_chat, lambda d: False, "Refund 42?") == "Ada"
        [record] = client.list_deferred(agent, run_id, state="resolved")
        assert record.resolution == "denied"


def _between_markers(path: Path) -> str:
    lines = path.read_text().splitlines()
    begin = next(i for i, line in enumerate(lines) if line.endswith("readme:begin"))
    end = next(i for i, line in enumerate(lines) if line.endswith("readme:end"))
    return "\n".join(lines[begin + 1 : end]).strip()


def test_readme_shows_each_languages_host_loop_verbatim():
    readme = (ROOT / "README.md").read_text()
    for lang, path in [("python", "clients/python/examples/host_loop.py"), ("js", "clients/typescript/examples/host-loop.js"),
                       ("go", "clients/go/hostloop_example_test.go")]:
        blocks = re.findall(rf"```{lang}\n(.*?)```", readme, re.S)
        code = _between_markers(ROOT / path)
        assert code.strip() in [b.strip() for b in blocks], f"README lacks {path}'s host loop verbatim"
