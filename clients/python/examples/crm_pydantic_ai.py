"""The seed's CRM scenario with pydantic-ai: the model finds the customer tool through
toolrouter's discovery, calls it, and answers "Ada"; then asks for a refund, which waits for a
person's approval (pydantic-ai's DeferredToolRequests) and runs once approved.

The model is pydantic-ai's FunctionModel playing a scripted model, so no network or API key is
needed; swap in `Agent("openai:gpt-5.4", ...)` for a real one. Needs a running toolrouter with the
CRM agent registered (README "Walk-through with grpcurl"), or run the tests, which start both:

    python examples/crm_pydantic_ai.py 127.0.0.1:50051 crm-agent
"""

from __future__ import annotations

import asyncio
import json
import sys

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

from toolrouter_client import AsyncClient
from toolrouter_client.pydantic_ai import ToolrouterToolset


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Discover, call, answer with what the tool returned; a refund request asks for the refund."""
    last = messages[-1].parts[-1]
    asked = next(p.content for m in messages for p in m.parts if getattr(p, "part_kind", "") == "user-prompt")
    if isinstance(last, ToolReturnPart):
        if last.tool_name == "discover_tools":
            found = last.content if isinstance(last.content, dict) else json.loads(last.content)
            hit = found["tools"][0]
            args = {"group": hit["group"], "tool": hit["tool"], "arguments": {"customer_id": 42}}
            return ModelResponse(parts=[ToolCallPart("call_tool", args, tool_call_id="call-2")])
        return ModelResponse(parts=[TextPart(last.content if isinstance(last.content, str) else json.dumps(last.content))])
    if "refund" in str(asked):
        args = {"group": "crm", "tool": "refund_payment", "arguments": {"customer_id": 42, "amount": 5}}
        return ModelResponse(parts=[ToolCallPart("call_tool", args, tool_call_id="refund-1")])
    return ModelResponse(parts=[ToolCallPart("discover_tools", {"query": "customer name", "group": "crm"}, tool_call_id="call-1")])


async def main(target: str, agent_id: str) -> tuple[str, str]:
    async with AsyncClient(target) as client:
        toolset = ToolrouterToolset(client, agent_id)
        agent = Agent(FunctionModel(scripted_model), toolsets=[toolset], output_type=[str, DeferredToolRequests])

        name = await agent.run("What is customer 42's name?")
        print("model:", name.output)  # Ada

        refund = await agent.run("Please refund customer 42 five euros.")
        requests = refund.output
        assert isinstance(requests, DeferredToolRequests), requests
        print("waiting for approval:", [(c.tool_name, c.args) for c in requests.approvals])
        answers = await toolset.resolve(requests, DeferredToolResults(approvals={c.tool_call_id: True for c in requests.approvals}))
        done = await agent.run(message_history=refund.all_messages(), deferred_tool_results=answers)
        print("model:", done.output)
        return name.output, done.output


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051", sys.argv[2] if len(sys.argv) > 2 else "crm-agent"))
