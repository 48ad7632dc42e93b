"""The pydantic-ai toolset against the real server: the CRM example answers "Ada", and each
toolrouter deferred record is one pydantic-ai deferred request answered by one resolution."""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDenied

from toolrouter_client import AsyncClient
from toolrouter_client.pydantic_ai import ToolrouterToolset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import crm_pydantic_ai  # noqa: E402


async def test_the_crm_example_answers_ada_and_runs_the_approved_refund(server, agent):
    name, refund = await crm_pydantic_ai.main(server.grpc, agent)
    assert name == "Ada"
    assert '"status": "done"' in refund and '"refunded": 5' in refund


def _script(*calls: ToolCallPart):
    """A model that makes these calls in one response, then answers with every tool return."""

    def model(messages, info):
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(" | ".join(f"{p.tool_name}={p.content}" for p in returns))])
        return ModelResponse(parts=list(calls))

    return FunctionModel(model)


async def test_approvals_and_client_calls_map_one_to_one_onto_deferred_tool_requests(server, agent):
    refund = ToolCallPart("call_tool", {"group": "crm", "tool": "refund_payment", "arguments": {"customer_id": 7, "amount": 2}}, tool_call_id="a1")
    other = ToolCallPart("call_tool", {"group": "crm", "tool": "refund_payment", "arguments": {"customer_id": 1, "amount": 9}}, tool_call_id="a2")
    email = ToolCallPart("call_tool", {"group": "mail", "tool": "send_email", "arguments": {"to": "ada@example.com", "body": "Hi"}}, tool_call_id="e1")
    async with AsyncClient(server.grpc) as client:
        toolset = ToolrouterToolset(client, agent)
        pyd = Agent(_script(refund, other, email), toolsets=[toolset], output_type=[str, DeferredToolRequests])
        first = await pyd.run("refund two customers and email Ada")
        requests = first.output
        assert isinstance(requests, DeferredToolRequests)
        assert [c.tool_call_id for c in requests.approvals] == ["a1", "a2"]
        assert [c.tool_call_id for c in requests.calls] == ["e1"]
        records = {r.deferred.tool_call_id: r.deferred for r in await client.list_deferred(agent)}
        assert {k: v.kind for k, v in records.items()} == {"a1": "approval", "a2": "approval", "e1": "client_execution"}
        assert {k: requests.metadata[k]["deferred_id"] for k in records} == {k: v.deferred_id for k, v in records.items()}

        answers = DeferredToolResults(approvals={"a1": True, "a2": ToolDenied("Too large.")}, calls={"e1": {"sent": True}})
        resolved = await toolset.resolve(requests, answers)
        # Denial and client result are recorded now; the approval when pydantic-ai runs the call.
        by_call = {r.deferred.tool_call_id: r for r in await client.list_deferred(agent, state=None)}
        assert (by_call["a2"].state, by_call["a2"].resolution) == ("resolved", "denied")
        assert (by_call["e1"].state, by_call["e1"].result.content) == ("resolved", {"sent": True})
        assert by_call["a1"].state == "pending"

        done = await pyd.run(message_history=first.all_messages(), deferred_tool_results=resolved)
        assert "'status': 'done'" in done.output and "'customer_id': 7" in done.output
        assert "Too large." in done.output and "{'sent': True}" in done.output
        by_call = {r.deferred.tool_call_id: r for r in await client.list_deferred(agent, state=None)}
        assert (by_call["a1"].state, by_call["a1"].resolution) == ("resolved", "approved")
        assert await client.list_deferred(agent) == []


async def test_the_toolset_shows_the_agents_model_tools_and_instructions(server, agent):
    seen = {}

    def model(messages, info):
        seen["tools"] = [t.name for t in info.function_tools]
        seen["instructions"] = info.instructions
        return ModelResponse(parts=[TextPart("ok")])

    async with AsyncClient(server.grpc) as client:
        await Agent(FunctionModel(model), toolsets=[ToolrouterToolset(client, agent, run="fixed-run")]).run("hi")
        expected = [t.name for t in (await client.get_model_tools(agent, "fixed-run")).model_tools]
    assert seen["tools"] == expected == ["discover_tools", "describe_tool", "call_tool", "list_tool_groups", "list_tools"]
    assert "discover_tools" in (seen["instructions"] or "")
