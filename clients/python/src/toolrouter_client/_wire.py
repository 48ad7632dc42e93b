"""The host API's types, and their conversion to and from the generated messages. Shared by the
sync and asyncio clients, which differ only in how they send."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from toolrouter_client._proto.toolrouter.v1 import definition_pb2 as d
from toolrouter_client._proto.toolrouter.v1 import router_pb2 as r
from toolrouter_client.errors import ClientInputError

Format = Literal["openai_chat", "openai_responses", "anthropic", "gemini", "mcp"]
"""A provider's wire shape (README "Provider formats")."""

_FORMATS: dict[str, int] = {
    "openai_chat": r.TOOL_FORMAT_OPENAI_CHAT,
    "openai_responses": r.TOOL_FORMAT_OPENAI_RESPONSES,
    "anthropic": r.TOOL_FORMAT_ANTHROPIC,
    "gemini": r.TOOL_FORMAT_GEMINI,
    "mcp": r.TOOL_FORMAT_MCP,
}
_KINDS = {
    r.DEFERRED_KIND_APPROVAL: "approval",
    r.DEFERRED_KIND_CLIENT_EXECUTION: "client_execution",
    r.DEFERRED_KIND_CONSENT: "consent",
}
DeferredKind = Literal["approval", "client_execution", "consent"]
DeferredState = Literal["pending", "executing", "resolved", "expired"]
_STATES: dict[str, int] = {
    "pending": r.DEFERRED_STATE_PENDING,
    "executing": r.DEFERRED_STATE_EXECUTING,
    "resolved": r.DEFERRED_STATE_RESOLVED,
    "expired": r.DEFERRED_STATE_EXPIRED,
}
_STATE_NAMES = {v: k for k, v in _STATES.items()}


@dataclass(frozen=True)
class Run:
    """A run: its id and, optionally, identity claims and attributes sent with every call."""

    run_id: str
    identity: Mapping[str, str] = field(default_factory=dict)
    attributes: Mapping[str, str] = field(default_factory=dict)


AgentLike = Union[str, tuple[str, int]]
"""An agent id (its default version, or the run's pinned one), or `(agent id, version)`."""
RunLike = Union[str, Run]


@dataclass(frozen=True)
class ModelTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    kind: str
    group: str
    tool: str


@dataclass(frozen=True)
class ModelTools:
    """What to show the model. `tools` is the provider's tools parameter (the parsed
    `tools_json`) when a format was asked for, else the neutral `model_tools` as dicts."""

    tools: Any
    instructions: str
    version: int
    diagnostics: list[str]
    model_tools: list[ModelTool]


@dataclass(frozen=True)
class Deferred:
    """A call that waits for the host: an approval, a client-executed tool, or a user's consent."""

    deferred_id: str
    kind: DeferredKind
    tool_call_id: str
    tool_name: str
    arguments: Any
    group: str
    tool: str
    consent_url: str


@dataclass(frozen=True)
class Result:
    """A finished call: `content` is what the model sees (parsed JSON), `provider` the same in
    the provider's shape when a format was given."""

    content: Any
    is_error: bool
    provider: Any = None


Outcome = Union[Result, Deferred]


@dataclass(frozen=True)
class ToolCallsOutcome:
    """`results`: what to append to the conversation for every finished call, in the provider's
    shape (the parsed `provider_results_json`); `outcomes`: one per call, in order;
    `deferred`: the calls waiting for the host (resolve each before the next model request)."""

    results: Any
    outcomes: list[Outcome]

    @property
    def deferred(self) -> list[Deferred]:
        return [o for o in self.outcomes if isinstance(o, Deferred)]


@dataclass(frozen=True)
class Resolution:
    """What a resolution gave: the model-visible result (`provider` in the provider's shape),
    or, for an approved client tool, `follow_up`: the client-execution record to answer next."""

    content: Any
    is_error: bool
    provider: Any = None
    follow_up: Deferred | None = None


@dataclass(frozen=True)
class DeferredRecord:
    deferred: Deferred
    agent_id: str
    run_id: str
    version: int
    state: DeferredState
    resolution: str
    result: Resolution | None


@dataclass(frozen=True)
class Approve:
    """Run the call; `arguments` replaces the model's (validated against the tool's schema)."""

    arguments: Any = None


@dataclass(frozen=True)
class Deny:
    """Do not run the call; the model is told `message`."""

    message: str = "The user denied this call."


@dataclass(frozen=True)
class ClientResult:
    """The result of a client-executed tool, as the model should see it."""

    content: Any
    is_error: bool = False


Decision = Union[Approve, Deny, ClientResult]


# ---- requests -------------------------------------------------------------------------------


def _text(value: object, field_name: str, *, empty_ok: bool = False) -> str:
    if not isinstance(value, str):
        raise ClientInputError(field_name, f"expected a string, got {type(value).__name__}")
    if not empty_ok and not value.strip():
        raise ClientInputError(field_name, "must not be empty")
    return value


def _json_text(value: object, field_name: str) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as e:
        raise ClientInputError(field_name, f"is not JSON-serializable ({e})") from None


def agent_ref(agent: object) -> d.AgentRef:
    if isinstance(agent, tuple) and len(agent) == 2:
        agent_id, version = agent
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise ClientInputError("agent[1]", f"expected a version number >= 0, got {version!r}")
        return d.AgentRef(agent_id=_text(agent_id, "agent[0]"), version=version)
    return d.AgentRef(agent_id=_text(agent, "agent"))


def _claims(value: object, field_name: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ClientInputError(field_name, f"expected a mapping of strings, got {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ClientInputError(f"{field_name}[{k!r}]", f"keys and values must be strings, got {type(v).__name__}")
    return dict(value)


def run_context(run: object) -> d.RunContext:
    if isinstance(run, Run):
        return d.RunContext(
            run_id=_text(run.run_id, "run.run_id"),
            identity=_claims(run.identity, "run.identity"),
            attributes=_claims(run.attributes, "run.attributes"),
        )
    return d.RunContext(run_id=_text(run, "run"))


def tool_format(value: object, *, required: bool) -> int:
    if value is None and not required:
        return r.TOOL_FORMAT_UNSPECIFIED
    if isinstance(value, str) and value in _FORMATS:
        return _FORMATS[value]
    raise ClientInputError("format", f"expected one of {sorted(_FORMATS)}, got {value!r}")


def _check_parts(calls: object) -> None:
    """The checks a host's mistakes hit first; the server checks each provider's shape fully."""
    if isinstance(calls, (str, bytes)) or not isinstance(calls, (Sequence, Mapping)):
        raise ClientInputError("calls", f"expected the provider's tool-call parts (a list or a message dict), got {type(calls).__name__}")
    if isinstance(calls, Sequence):
        for i, part in enumerate(calls):
            if not isinstance(part, Mapping):
                raise ClientInputError(f"calls[{i}]", f"expected a dict (a tool-call part), got {type(part).__name__}")


def handle_request(agent: object, run: object, calls: object, format: object) -> r.HandleToolCallsRequest:
    f = tool_format(format, required=True)
    _check_parts(calls)
    return r.HandleToolCallsRequest(
        agent=agent_ref(agent), run=run_context(run), format=f, provider_calls_json=_json_text(calls, "calls")
    )


def call_request(agent: object, run: object, tool_call_id: object, name: object, arguments: object, format: object) -> r.HandleToolCallRequest:
    if not isinstance(arguments, Mapping):
        raise ClientInputError("arguments", f"expected a dict of the tool's arguments, got {type(arguments).__name__}")
    call = r.ToolCall(
        tool_call_id=_text(tool_call_id, "tool_call_id"), tool_name=_text(name, "name"), arguments_json=_json_text(arguments, "arguments")
    )
    return r.HandleToolCallRequest(agent=agent_ref(agent), run=run_context(run), call=call, format=tool_format(format, required=False))


def tools_request(agent: object, run: object, format: object, defer_loading: object) -> r.GetModelToolsRequest:
    if not isinstance(defer_loading, bool):
        raise ClientInputError("defer_loading", f"expected a bool, got {type(defer_loading).__name__}")
    return r.GetModelToolsRequest(
        agent=agent_ref(agent), run=run_context(run), format=tool_format(format, required=False), defer_loading=defer_loading
    )


def resolve_request(deferred_id: object, decision: object, format: object) -> r.ResolveDeferredRequest:
    req = r.ResolveDeferredRequest(deferred_id=_text(deferred_id, "deferred_id"), format=tool_format(format, required=False))
    if isinstance(decision, Approve):
        approve = r.Approve()
        if decision.arguments is not None:
            approve.arguments_json = _json_text(decision.arguments, "decision.arguments")
        req.approve.CopyFrom(approve)
    elif isinstance(decision, Deny):
        req.deny.CopyFrom(r.Deny(message=_text(decision.message, "decision.message", empty_ok=True)))
    elif isinstance(decision, ClientResult):
        if not isinstance(decision.is_error, bool):
            raise ClientInputError("decision.is_error", f"expected a bool, got {type(decision.is_error).__name__}")
        req.client_result.CopyFrom(
            r.ClientResult(content_json=_json_text(decision.content, "decision.content"), is_error=decision.is_error)
        )
    else:
        raise ClientInputError("decision", f"expected Approve, Deny or ClientResult, got {type(decision).__name__}")
    return req


def list_request(agent: object, run: object, state: object, format: object, page_token: str) -> r.ListDeferredRequest:
    if state is not None and state not in _STATES:
        raise ClientInputError("state", f"expected one of {sorted(_STATES)} or None, got {state!r}")
    return r.ListDeferredRequest(
        agent_id="" if agent is None else _text(agent, "agent"),
        run_id="" if run is None else _text(run.run_id if isinstance(run, Run) else run, "run"),
        state=_STATES[state] if state is not None else r.DEFERRED_STATE_UNSPECIFIED,
        format=tool_format(format, required=False),
        page_size=100,
        page_token=page_token,
    )


def end_run_request(agent: object, run: object) -> r.EndRunRequest:
    run_id = run.run_id if isinstance(run, Run) else run
    return r.EndRunRequest(agent_id=_text(agent, "agent"), run_id=_text(run_id, "run"))


# ---- responses ------------------------------------------------------------------------------


def _parse(text: str) -> Any:
    """A JSON field of a response; a tool's plain-text answer stays text."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def deferred(call: r.DeferredCall) -> Deferred:
    return Deferred(
        deferred_id=call.deferred_id,
        kind=_KINDS.get(call.kind, "approval"),  # type: ignore[arg-type]
        tool_call_id=call.original_call.tool_call_id,
        tool_name=call.original_call.tool_name,
        arguments=_parse(call.target.arguments_json),
        group=call.target.group,
        tool=call.target.tool,
        consent_url=call.consent_url,
    )


def model_tools(resp: r.GetModelToolsResponse) -> ModelTools:
    kinds = {r.MODEL_TOOL_KIND_CONTROL: "control", r.MODEL_TOOL_KIND_DIRECT: "direct", r.MODEL_TOOL_KIND_PINNED: "pinned", r.MODEL_TOOL_KIND_HOT: "hot"}
    neutral = [
        ModelTool(t.name, t.description, _parse(t.input_schema_json) or {"type": "object"}, kinds.get(t.kind, "direct"), t.group, t.tool)
        for t in resp.tools
    ]
    tools = _parse(resp.tools_json) if resp.tools_json else [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in neutral
    ]
    return ModelTools(tools, resp.instructions, resp.version, list(resp.diagnostics), neutral)


def outcome(o: r.HandleToolCallResponse) -> Outcome:
    if o.HasField("deferred"):
        return deferred(o.deferred)
    return Result(_parse(o.result.content_json), o.result.is_error, _parse(o.result.provider_json))


def calls_outcome(resp: r.HandleToolCallsResponse) -> ToolCallsOutcome:
    return ToolCallsOutcome(_parse(resp.provider_results_json), [outcome(o) for o in resp.outcomes])


def resolution(result: r.ToolResult) -> Resolution:
    follow = deferred(result.follow_up) if result.HasField("follow_up") else None
    return Resolution(_parse(result.content_json), result.is_error, _parse(result.provider_json), follow)


def record(rec: r.DeferredRecord) -> DeferredRecord:
    return DeferredRecord(
        deferred=deferred(rec.call),
        agent_id=rec.agent_id,
        run_id=rec.run_id,
        version=rec.version,
        state=_STATE_NAMES.get(rec.state, "pending"),  # type: ignore[arg-type]
        resolution=rec.resolution,
        result=resolution(rec.result) if rec.HasField("result") else None,
    )
