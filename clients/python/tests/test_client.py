"""The host API (sync and asyncio) against the real server: tools in a provider's shape, the
model's tool-call parts handled as they came, approvals, client-executed tools, runs, and
errors that name the field."""

from __future__ import annotations

import json

import grpc
import pytest

from toolrouter_client import (
    Approve,
    AsyncClient,
    Client,
    ClientInputError,
    ClientResult,
    Deny,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    Result,
    Run,
)
from toolrouter_client.proto import registry_pb2, registry_pb2_grpc

from conftest import crm_definition


def assistant(*calls: tuple[str, str, dict]) -> dict:
    """An OpenAI Chat Completions assistant message with these tool calls (id, name, arguments)."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls],
    }


def call_tool(group: str, tool: str, **arguments: object) -> dict:
    return {"group": group, "tool": tool, "arguments": arguments}


@pytest.fixture
def client(server):
    with Client(server.grpc) as c:
        yield c


def test_model_tools_come_in_the_providers_shape_with_the_instructions(client, agent, run_id):
    tools = client.get_model_tools(agent, run_id, format="openai_chat")
    names = [t["function"]["name"] for t in tools.tools]
    assert names == ["discover_tools", "describe_tool", "call_tool", "list_tool_groups", "list_tools"]
    assert all(t["type"] == "function" for t in tools.tools)
    assert "discover_tools" in tools.instructions and tools.version == 1
    anthropic = client.get_model_tools(agent, run_id, format="anthropic")
    assert [t["name"] for t in anthropic.tools] == names and "input_schema" in anthropic.tools[0]


def test_the_crm_lookup_through_call_tool_answers_ada(client, agent, run_id):
    out = client.handle_tool_calls(agent, run_id, assistant(("c1", "call_tool", call_tool("crm", "customer_name", customer_id=42))), format="openai_chat")
    assert out.deferred == []
    assert out.outcomes == [Result(content="Ada", is_error=False, provider=out.outcomes[0].provider)]
    assert out.results == [{"role": "tool", "tool_call_id": "c1", "content": "Ada"}]


def test_a_repeated_tool_call_id_gets_the_first_outcome(client, agent, run_id):
    msg = assistant(("c1", "call_tool", call_tool("crm", "customer_name", customer_id=42)))
    first = client.handle_tool_calls(agent, run_id, msg, format="openai_chat")
    again = client.handle_tool_calls(agent, run_id, msg, format="openai_chat")
    assert first.results == again.results
    other = assistant(("c1", "call_tool", call_tool("crm", "customer_name", customer_id=7)))
    with pytest.raises(FailedPreconditionError) as refused:
        client.handle_tool_calls(agent, run_id, other, format="openai_chat")
    assert "already used in this run" in refused.value.message and "tool_call_id" in str(refused.value)


def test_an_approval_waits_then_runs_once_approved(client, agent, run_id):
    out = client.handle_tool_calls(
        agent, run_id, assistant(("r1", "call_tool", call_tool("crm", "refund_payment", customer_id=42, amount=5))), format="openai_chat"
    )
    [waiting] = out.deferred
    assert (waiting.kind, waiting.tool_call_id, waiting.tool, waiting.arguments) == ("approval", "r1", "refund_payment", {"customer_id": 42, "amount": 5})
    assert out.results == []  # nothing finished: the host resolves it before the next model request
    pending = client.list_deferred(agent, run_id)
    assert [r.deferred.deferred_id for r in pending] == [waiting.deferred_id]
    done = client.resolve(waiting.deferred_id, Approve(arguments={"customer_id": 42, "amount": 3}), format="openai_chat")
    assert done.content == {"refunded": 3, "customer_id": 42, "status": "done"} and not done.is_error
    assert done.provider["role"] == "tool" and done.provider["tool_call_id"] == "r1"
    assert client.list_deferred(agent, run_id) == []
    [resolved] = client.list_deferred(agent, run_id, state="resolved")
    assert resolved.resolution == "approved" and resolved.result.content == done.content


def test_a_denied_call_never_runs_and_the_model_is_told_why(client, agent, run_id):
    out = client.handle_tool_calls(agent, run_id, assistant(("r1", "call_tool", call_tool("crm", "refund_payment", customer_id=42, amount=5))), format="openai_chat")
    denied = client.resolve(out.deferred[0].deferred_id, Deny("Refunds need a manager."))
    assert "Refunds need a manager." in json.dumps(denied.content)
    [record] = client.list_deferred(agent, run_id, state="resolved")
    assert record.resolution == "denied"


def test_a_client_executed_tool_is_answered_by_the_host(client, agent, run_id):
    out = client.handle_tool_calls(
        agent, run_id, assistant(("m1", "call_tool", call_tool("mail", "send_email", to="ada@example.com", body="Hi"))), format="openai_chat"
    )
    [waiting] = out.deferred
    assert waiting.kind == "client_execution" and waiting.arguments == {"to": "ada@example.com", "body": "Hi"}
    sent = client.resolve(waiting.deferred_id, ClientResult({"sent": True}), format="openai_chat")
    assert sent.content == {"sent": True}
    assert sent.provider["tool_call_id"] == "m1"


def test_ending_a_run_releases_its_version_pin(server, client, agent, run_id):
    assert client.get_model_tools(agent, run_id).version == 1
    v2 = crm_definition(server.executor)
    v2.instructions = "Version two."
    with grpc.insecure_channel(server.grpc) as channel:
        registry_pb2_grpc.AgentRegistryStub(channel).CreateAgentVersion(
            registry_pb2.CreateAgentVersionRequest(agent_id=agent, definition=v2, make_default=True)
        )
    assert client.get_model_tools(agent, run_id).version == 1  # pinned
    client.end_run(agent, run_id)
    assert client.get_model_tools(agent, run_id).version == 2
    assert client.get_model_tools((agent, 1), "another-run").version == 1


def test_a_malformed_tool_call_part_is_refused_naming_its_field(client, agent, run_id):
    part = {"type": "function", "function": {"name": "call_tool", "arguments": "{}"}}  # no "id"
    with pytest.raises(InvalidArgumentError) as refused:
        client.handle_tool_calls(agent, run_id, [part], format="openai_chat")
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.fields and refused.value.fields[0].startswith("provider_calls_json[0]")
    assert refused.value.fields[0] in str(refused.value)


def test_an_unknown_agent_is_not_found(client, run_id):
    with pytest.raises(NotFoundError):
        client.get_model_tools("no-such-agent", run_id)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda c: c.handle_tool_calls("a", "r", "not parts", format="openai_chat"), "calls"),
        (lambda c: c.handle_tool_calls("a", "r", [{"id": "x"}, 5], format="openai_chat"), "calls[1]"),
        (lambda c: c.handle_tool_calls("a", "r", [{"id": object()}], format="openai_chat"), "calls"),
        (lambda c: c.handle_tool_calls("a", "r", [], format="openai"), "format"),
        (lambda c: c.get_model_tools(42, "r"), "agent"),
        (lambda c: c.get_model_tools(("a", -1), "r"), "agent[1]"),
        (lambda c: c.get_model_tools("a", Run("r", identity={"user_id": 7})), "run.identity['user_id']"),
        (lambda c: c.get_model_tools("a", ""), "run"),
        (lambda c: c.resolve("d", "yes"), "decision"),
        (lambda c: c.handle_tool_call("a", "r", "", "call_tool", {}), "tool_call_id"),
        (lambda c: c.list_deferred("a", state="done"), "state"),
    ],
)
def test_bad_input_is_a_clear_error_naming_the_field(client, call, field):
    with pytest.raises(ClientInputError) as bad:
        call(client)
    assert bad.value.field == field and str(bad.value).startswith(f"{field}: ")


async def test_the_asyncio_client_handles_calls_and_approvals(server, agent, run_id):
    async with AsyncClient(server.grpc) as client:
        tools = await client.get_model_tools(agent, run_id, format="gemini")
        assert any(f["name"] == "call_tool" for f in tools.tools[0]["functionDeclarations"])
        parts = [{"functionCall": {"id": "g1", "name": "call_tool", "args": call_tool("crm", "customer_name", customer_id=42)}},
                 {"functionCall": {"id": "g2", "name": "call_tool", "args": call_tool("crm", "refund_payment", customer_id=42, amount=1)}}]
        out = await client.handle_tool_calls(agent, run_id, parts, format="gemini")
        assert out.results[0]["functionResponse"]["id"] == "g1" and "Ada" in json.dumps(out.results)
        [waiting] = out.deferred
        assert [r.deferred.deferred_id for r in await client.list_deferred(agent, run_id)] == [waiting.deferred_id]
        done = await client.resolve(waiting.deferred_id, Approve(), format="gemini")
        assert done.content["status"] == "done" and done.provider["functionResponse"]["id"] == "g2"
        with pytest.raises(InvalidArgumentError) as refused:
            await client.handle_tool_calls(agent, run_id, [{"functionCall": {"name": 5}}], format="gemini")
        assert refused.value.fields[0].startswith("provider_calls_json[0]")
        await client.end_run(agent, run_id)
