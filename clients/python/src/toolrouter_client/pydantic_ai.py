"""pydantic-ai integration: toolrouter's model tools as a pydantic-ai toolset.

Each toolrouter deferred record is one pydantic-ai deferred tool call, and each answer one
resolution of that record:

| toolrouter                          | pydantic-ai                                              |
|-------------------------------------|----------------------------------------------------------|
| APPROVAL record                     | `DeferredToolRequests.approvals` (`ApprovalRequired`)     |
| CLIENT_EXECUTION or CONSENT record  | `DeferredToolRequests.calls` (`CallDeferred`)             |
| Approve (optionally new arguments)  | `ToolApproved(override_args=...)` / `True`               |
| Deny(message)                       | `ToolDenied(message)` / `False`                          |
| ClientResult(content)               | `DeferredToolResults.calls[id]`                          |

Pass the user's answers through `ToolrouterToolset.resolve(requests, results)` and the
returned `DeferredToolResults` to the next `agent.run(..., deferred_tool_results=...)`: denials
and client results are recorded in toolrouter there, approvals when pydantic-ai runs the
approved call (its result comes from toolrouter's execution). The metadata of each request is
`{"deferred_id", "kind", "group", "tool", "consent_url"}`.

The toolrouter run is, by default, the pydantic-ai conversation (`RunContext.conversation_id`),
which stays the same across the runs of one conversation, so the version pin and exactly-once
tool call ids hold across the deferred round trip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_core import SchemaValidator, core_schema

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDefinition, ToolDenied
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from toolrouter_client import _wire as w
from toolrouter_client.client import AsyncClient
from toolrouter_client.errors import ClientInputError

__all__ = ["ToolrouterToolset"]

# toolrouter validates arguments against each tool's schema and answers the model itself.
_ANY_ARGS = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))
_DEFERRED_ID = "deferred_id"
_APPROVED_ARGUMENTS = "toolrouter_approved_arguments"


def _conversation(ctx: RunContext[Any]) -> w.RunLike:
    if not ctx.conversation_id:
        raise ClientInputError("run", "no run given and the pydantic-ai run has no conversation_id")
    return ctx.conversation_id


class ToolrouterToolset(AbstractToolset[Any]):
    """The agent's model tools (control tools, direct, pinned and hot tools) from toolrouter;
    calls go through toolrouter (validation, routing, exactly once per tool call id)."""

    def __init__(
        self,
        client: AsyncClient,
        agent: w.AgentLike,
        run: w.RunLike | Callable[[RunContext[Any]], w.RunLike] | None = None,
        *,
        id: str = "toolrouter",
    ) -> None:
        self._client = client
        self._agent = agent
        self._run = run
        self._id = id

    @property
    def id(self) -> str | None:
        return self._id

    def run_for(self, ctx: RunContext[Any]) -> w.RunLike:
        if self._run is None:
            return _conversation(ctx)
        return self._run(ctx) if callable(self._run) else self._run

    async def get_instructions(self, ctx: RunContext[Any]) -> str | None:
        tools = await self._client.get_model_tools(self._agent, self.run_for(ctx))
        return tools.instructions or None

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await self._client.get_model_tools(self._agent, self.run_for(ctx))
        return {
            t.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.input_schema),
                max_retries=1,
                args_validator=_ANY_ARGS,
            )
            for t in tools.model_tools
        }

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]) -> Any:
        run = self.run_for(ctx)
        if ctx.tool_call_approved:
            return await self._approved(name, tool_args, ctx, run)
        if not ctx.tool_call_id:
            raise ClientInputError("tool_call_id", f"pydantic-ai gave no tool call id for {name!r}")
        outcome = await self._client.handle_tool_call(self._agent, run, ctx.tool_call_id, name, tool_args)
        return self._answer(outcome)

    def _answer(self, outcome: w.Outcome) -> Any:
        if isinstance(outcome, w.Result):
            return outcome.content
        metadata = {_DEFERRED_ID: outcome.deferred_id, "kind": outcome.kind, "group": outcome.group, "tool": outcome.tool, "consent_url": outcome.consent_url}
        if outcome.kind == "approval":
            raise ApprovalRequired(metadata=metadata)
        raise CallDeferred(metadata=metadata)

    async def _approved(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], run: w.RunLike) -> Any:
        metadata = ctx.tool_call_metadata if isinstance(ctx.tool_call_metadata, dict) else {}
        deferred_id = metadata.get(_DEFERRED_ID) or await self._pending_id(run, ctx.tool_call_id)
        resolution = await self._client.resolve(deferred_id, w.Approve(arguments=metadata.get(_APPROVED_ARGUMENTS)))
        if resolution.follow_up is not None:
            return self._answer(resolution.follow_up)
        return resolution.content

    async def _pending_id(self, run: w.RunLike, tool_call_id: str | None) -> str:
        agent_id = self._agent[0] if isinstance(self._agent, tuple) else self._agent
        for rec in await self._client.list_deferred(agent_id, run, state="pending"):
            if rec.deferred.tool_call_id == tool_call_id:
                return rec.deferred.deferred_id
        raise ClientInputError("tool_call_id", f"no pending toolrouter approval for tool call {tool_call_id!r}")

    async def resolve(self, requests: DeferredToolRequests, results: DeferredToolResults) -> DeferredToolResults:
        """Records the user's answers in toolrouter, one resolution per deferred record, and
        returns the results for the next `agent.run(..., deferred_tool_results=...)`."""
        out = DeferredToolResults(metadata=dict(results.metadata))
        for part in requests.approvals:
            call_id = part.tool_call_id
            if call_id not in results.approvals:
                continue
            deferred_id = _deferred_id(requests, call_id)
            answer = results.approvals[call_id]
            if answer is True or isinstance(answer, ToolApproved):
                # Resolved when pydantic-ai runs the approved call (call_tool), so its result
                # reaches the model through pydantic-ai's own path.
                out.approvals[call_id] = answer
                extra: dict[str, Any] = {_DEFERRED_ID: deferred_id}
                if isinstance(answer, ToolApproved) and answer.override_args is not None:
                    # toolrouter's Approve replaces the target tool's arguments (for a call
                    # through `call_tool`, the inner `arguments`), validated by its schema.
                    extra[_APPROVED_ARGUMENTS] = answer.override_args
                    out.approvals[call_id] = ToolApproved()
                out.metadata[call_id] = {**out.metadata.get(call_id, {}), **extra}
            else:
                denied = answer if isinstance(answer, ToolDenied) else ToolDenied()
                resolution = await self._client.resolve(deferred_id, w.Deny(denied.message))
                out.approvals[call_id] = ToolDenied(_text_of(resolution.content, denied.message))
        for part in requests.calls:
            call_id = part.tool_call_id
            if call_id not in results.calls:
                continue
            deferred_id = _deferred_id(requests, call_id)
            resolution = await self._client.resolve(deferred_id, w.ClientResult(results.calls[call_id]))
            out.calls[call_id] = resolution.content
        return out


def _deferred_id(requests: DeferredToolRequests, call_id: str) -> str:
    """The toolrouter deferred record a pydantic-ai deferred call stands for."""
    deferred_id = requests.metadata.get(call_id, {}).get(_DEFERRED_ID)
    if not deferred_id:
        raise ClientInputError(f"requests.metadata[{call_id!r}]", "carries no toolrouter deferred_id")
    return deferred_id


def _text_of(content: Any, fallback: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict) and isinstance(content.get("message"), str):
        return content["message"]
    return fallback
