"""Checks toolrouter's provider wire shapes against the official Python SDKs' own types
(openai, anthropic, google-genai, mcp), called by tests/provider_sdks.rs.

    pip install 'openai>=3,<4' 'anthropic>=2,<3' 'google-genai>=3,<4' 'mcp>=2,<3'

Subcommands (JSON on stdin):

  samples  {"calls": [{"id", "name", "arguments"}, ...]}  ->  one JSON object of sample model
           responses holding those calls, built with each SDK's *response* models:
           openai_chat (choices[0].message), openai_responses (Response.output: a reasoning
           item, then function_call items), anthropic (Message.content: text, then tool_use),
           gemini (candidate Content; only the first functionCall has an id; names starting
           with a digit or '-' get a '_' prefix), mcp (tools/call params, call id in _meta),
           openai_responses_search (Response.output with one client tool_search_call "ts_1").

  check    {"tools": {FORMAT: v}, "results": {FORMAT: v}, "parts": {FORMAT: [v, ...]}}  ->
           one line per check, "ok <what>: <summary>" or "FAIL <what>: <reason>"; exit 1 on any
           FAIL. Tools must be exactly the provider's `tools` parameter (plus OpenAI strict-mode
           schema rules and name rules), results what the host appends, parts single results.
           TypedDict params silently drop unknown keys, so those are rejected here by hand.
"""

import json
import re
import sys
import typing
import warnings
from collections.abc import Iterable, Iterator

import typing_extensions
from pydantic import TypeAdapter, ValidationError

import anthropic.types as at
import mcp.types as mt
from google.genai import types as gt
from openai.types import chat as oc
from openai.types import responses as orr
from openai.types.responses.response_input_item_param import FunctionCallOutput

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # also Anthropic's rule
GEMINI_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")


class Bad(Exception):
    """A check failed for a reason the SDK types do not express."""


# ---------------------------------------------------------------- TypedDict helpers

# Adapters stay alive for the whole run: iterating a lazily validated Iterable field after
# its TypeAdapter was garbage-collected once panicked pydantic-core.
_ADAPTERS: dict = {}


def validate(td, value):
    """Validates `value` as the TypedDict (or union) `td`, strictly: every lazy Iterable is
    consumed (so its elements are validated) and unknown keys are rejected."""
    if td not in _ADAPTERS:
        _ADAPTERS[td] = TypeAdapter(td)
    _consume(_ADAPTERS[td].validate_python(value))
    unknown = unknown_keys(value, td, "")
    if unknown:
        raise Bad("unknown key(s) " + ", ".join(unknown))


def _consume(v):
    if isinstance(v, dict):
        for x in v.values():
            _consume(x)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _consume(x)
    elif isinstance(v, Iterator) or type(v).__name__ == "ValidatorIterator":
        for x in v:
            _consume(x)


# Required[...] / NotRequired[...] / Annotated[...] only mark keys; look through them.
_MARKERS = {getattr(m, n, None) for m in (typing, typing_extensions)
            for n in ("Required", "NotRequired", "Annotated")} - {None}


def _strip(ann):
    while typing.get_origin(ann) in _MARKERS:
        ann = typing.get_args(ann)[0]
    return ann


def unknown_keys(value, ann, path):
    """Keys of `value` (recursively, following TypedDict fields) that the type does not
    declare. Plain Dict fields (JSON Schemas, tool inputs) and extra='allow' TypedDicts are
    open and not descended into."""
    ann = _strip(ann)
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Union:
        options = [a for a in map(_strip, args) if _matches(value, a)]
        return unknown_keys(value, options[0], path) if len(options) == 1 else []
    if isinstance(value, list) and args and origin is not None and origin is not dict \
            and isinstance(origin, type) and issubclass(origin, Iterable):
        return [k for i, x in enumerate(value) for k in unknown_keys(x, args[0], f"{path}[{i}]")]
    if not (typing_extensions.is_typeddict(ann) and isinstance(value, dict)):
        return []
    if getattr(ann, "__pydantic_config__", {}).get("extra") == "allow":
        return []
    hints = _hints(ann)
    out = [f"{path}.{k}".lstrip(".") for k in value if k not in hints]
    for k, sub in value.items():
        if k in hints:
            out += unknown_keys(sub, hints[k], f"{path}.{k}")
    return out


def _hints(td):
    try:
        return typing.get_type_hints(td, include_extras=True)
    except Exception:  # an unresolvable forward reference: still check this level's keys
        return dict.fromkeys(td.__required_keys__ | td.__optional_keys__, object)


def _matches(value, ann):
    """Whether `value` can be this union member: type kind, and for TypedDicts the literal
    discriminator (`type` or `role`)."""
    if typing_extensions.is_typeddict(ann):
        if not isinstance(value, dict):
            return False
        hints = _hints(ann)
        for key in ("type", "role"):
            lit = _strip(hints.get(key, object))
            if typing.get_origin(lit) is typing.Literal and key in value and value[key] not in typing.get_args(lit):
                return False
        return True
    origin = typing.get_origin(ann) or ann
    if isinstance(value, list):
        return origin not in (str, dict) and isinstance(origin, type) and issubclass(origin, Iterable)
    return isinstance(origin, type) and isinstance(value, origin)


def reject(reason):
    raise Bad(reason)


def as_list(value, what="value"):
    if not isinstance(value, list):
        raise Bad(f"{what} is not a JSON array")
    return value


# ---------------------------------------------------------------- OpenAI strict mode

STRICT_KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum", "const",
                   "anyOf", "$ref", "$defs", "description", "title", "pattern", "format", "minimum",
                   "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems"}
STRICT_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
JSON_TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}


def check_strict(root):
    """OpenAI Structured Outputs' subset, per the "Supported schemas" docs."""
    if not isinstance(root, dict) or root.get("type") != "object":
        raise Bad('strict schema root must be {"type": "object"}')
    totals = {"properties": 0, "enum": 0}
    defs = root.get("$defs", {})

    def walk(s, where, depth):
        if not isinstance(s, dict):
            raise Bad(f"{where}: schema is not an object")
        if depth > 10:
            raise Bad(f"{where}: more than 10 levels of nesting")
        extra = set(s) - STRICT_KEYWORDS
        if extra:
            raise Bad(f"{where}: keyword(s) not supported in strict mode: {sorted(extra)}")
        types = s.get("type", [])
        types = [types] if isinstance(types, str) else types
        if not set(types) <= JSON_TYPES:
            raise Bad(f"{where}: unknown type {s['type']!r}")
        if "format" in s and s["format"] not in STRICT_FORMATS:
            raise Bad(f"{where}: format {s['format']!r} not supported in strict mode")
        if "$ref" in s:
            ref = s["$ref"]
            if ref != "#" and not (ref.startswith("#/$defs/") and ref[8:] in defs):
                raise Bad(f"{where}: $ref {ref!r} does not resolve to the root or a root $defs entry")
        totals["enum"] += len(s.get("enum", []))
        if "object" in types or "properties" in s:
            props = s.get("properties", {})
            totals["properties"] += len(props)
            if s.get("additionalProperties") is not False:
                raise Bad(f"{where}: object without additionalProperties: false")
            if sorted(s.get("required", [])) != sorted(props):
                missing = sorted(set(props) - set(s.get("required", [])))
                raise Bad(f"{where}: required must list every property (missing {missing})")
            for k, p in props.items():
                walk(p, f"{where}.properties.{k}", depth + 1)
        if "items" in s:
            walk(s["items"], f"{where}.items", depth + 1)
        for i, alt in enumerate(s.get("anyOf", [])):
            walk(alt, f"{where}.anyOf[{i}]", depth)
        for k, d in s.get("$defs", {}).items():
            walk(d, f"{where}.$defs.{k}", 1)  # a def's depth depends on where it is used; approximated

    walk(root, "parameters", 1)
    if totals["properties"] > 5000:
        raise Bad(f"{totals['properties']} properties exceed 5000")
    if totals["enum"] > 1000:
        raise Bad(f"{totals['enum']} enum values exceed 1000")


def openai_function(name, strict, params, where):
    if not isinstance(name, str) or not OPENAI_NAME.match(name):
        raise Bad(f"{where}: name {name!r} does not match {OPENAI_NAME.pattern}")
    if strict is True:
        try:
            check_strict(params)
        except Bad as e:
            raise Bad(f"{where} ({name}, strict): {e}") from None


# ---------------------------------------------------------------- tools

def tools_openai_chat(v):
    for i, t in enumerate(as_list(v)):
        validate(oc.ChatCompletionFunctionToolParam, t)
        f = t["function"]
        openai_function(f["name"], f.get("strict"), f.get("parameters"), f"[{i}]")
    return f"{len(v)} ChatCompletionFunctionToolParam"


def tools_openai_responses(v, deferred=False):
    searches = 0
    for i, t in enumerate(as_list(v)):
        if deferred and isinstance(t, dict) and t.get("type") == "tool_search":
            validate(orr.ToolSearchToolParam, t)
            if t.get("execution") != "client":
                raise Bad(f"[{i}]: tool_search is not client-executed")
            searches += 1
            continue
        validate(orr.FunctionToolParam, t)
        openai_function(t["name"], t["strict"], t["parameters"], f"[{i}]")
    if deferred and searches != 1:
        raise Bad(f"expected exactly one client tool_search tool, found {searches}")
    return f"{len(v) - searches} FunctionToolParam" + (" + 1 ToolSearchToolParam" if deferred else "")


def tools_anthropic(v, deferred=False):
    for i, t in enumerate(as_list(v)):
        validate(at.ToolParam, t)
        if not OPENAI_NAME.match(t["name"]):
            raise Bad(f"[{i}]: name {t['name']!r} does not match {OPENAI_NAME.pattern}")
        if not isinstance(t["input_schema"], dict) or t["input_schema"].get("type") != "object":
            raise Bad(f"[{i}] ({t['name']}): input_schema root type is not object")
    if deferred:
        loaded = [t for t in v if "defer_loading" not in t]
        if not loaded:
            raise Bad("every tool is deferred (the API needs at least one loaded tool)")
        if any(t.get("defer_loading") is not True for t in v if "defer_loading" in t):
            raise Bad("defer_loading present but not true")
        if len(v) > 10000:
            raise Bad(f"{len(v)} tools exceed 10000")
        return f"{len(v)} ToolParam, {len(v) - len(loaded)} deferred"
    return f"{len(v)} ToolParam"


def tools_gemini(v):
    n = 0
    for i, t in enumerate(as_list(v)):
        with warnings.catch_warnings():
            # An unknown schema type only warns (and becomes a pseudo enum member): make it fail.
            warnings.simplefilter("error")
            tool = gt.Tool.model_validate(t)
        for fd in tool.function_declarations or []:
            n += 1
            if not GEMINI_NAME.match(fd.name or ""):
                raise Bad(f"[{i}]: function name {fd.name!r} does not match {GEMINI_NAME.pattern}")
            if fd.parameters is not None and fd.parameters_json_schema is not None:
                raise Bad(f"[{i}] ({fd.name}): parameters together with parametersJsonSchema")
            if fd.response is not None and fd.response_json_schema is not None:
                raise Bad(f"[{i}] ({fd.name}): response together with responseJsonSchema")
    return f"{len(v)} Tool, {n} FunctionDeclaration"


def tools_mcp(v):
    for i, t in enumerate(as_list(v)):
        tool = mt.Tool.model_validate(t)
        if tool.input_schema.get("type") != "object":
            raise Bad(f"[{i}] ({tool.name}): inputSchema root type is not object")
    return f"{len(v)} mcp.types.Tool"


# ---------------------------------------------------------------- results and parts

def part_openai_chat(p):
    validate(oc.ChatCompletionToolMessageParam, p)
    return "ChatCompletionToolMessageParam"


def part_openai_responses(p):
    validate(FunctionCallOutput, p)
    if not p.get("call_id"):
        raise Bad("function_call_output without call_id")
    return "FunctionCallOutput"


def part_anthropic(p):
    validate(at.ToolResultBlockParam, p)
    return "ToolResultBlockParam"


def part_gemini(p):
    part = gt.Part.model_validate(p)
    if part.function_response is None:
        raise Bad("Part without functionResponse")
    if not isinstance(part.function_response.response, dict):
        raise Bad("functionResponse.response is not an object")
    return "Part(functionResponse)"


def part_mcp(p):
    mt.CallToolResult.model_validate(p)
    return "CallToolResult"


def part_anthropic_search(p):
    validate(at.ToolResultBlockParam, p)
    refs = p.get("content")
    if not isinstance(refs, list) or not refs:
        raise Bad("content is not a non-empty list of tool_reference blocks")
    for r in refs:
        validate(at.ToolReferenceBlockParam, r)
    return f"ToolResultBlockParam with {len(refs)} ToolReferenceBlockParam"


def part_openai_responses_search(p):
    validate(orr.ResponseToolSearchOutputItemParamParam, p)
    if not p.get("call_id"):
        raise Bad("tool_search_output without call_id")
    for i, t in enumerate(as_list(p["tools"], "tools")):
        validate(orr.FunctionToolParam, t)
        openai_function(t["name"], t["strict"], t["parameters"], f"tools[{i}]")
    return f"ResponseToolSearchOutputItemParamParam with {len(p['tools'])} FunctionToolParam"


PARTS = {"openai_chat": part_openai_chat, "openai_responses": part_openai_responses,
         "anthropic": part_anthropic, "gemini": part_gemini, "mcp": part_mcp,
         "anthropic_search": part_anthropic_search, "openai_responses_search": part_openai_responses_search}


def results_anthropic(v):
    if v is None:
        return "null (nothing finished)"
    validate(at.MessageParam, v)
    if v.get("role") != "user" or not isinstance(v.get("content"), list):
        raise Bad('not a {"role": "user", "content": [...]} message')
    for block in v["content"]:
        part_anthropic(block)
    return f"MessageParam with {len(v['content'])} ToolResultBlockParam"


def results_list(part):
    def check(v):
        kinds = {part(p) for p in as_list(v)}
        return f"{len(v)} x {kinds.pop() if kinds else 'nothing'}"
    return check


TOOLS = {"openai_chat": tools_openai_chat, "openai_responses": tools_openai_responses,
         "openai_responses_deferred": lambda v: tools_openai_responses(v, deferred=True),
         "anthropic": tools_anthropic, "anthropic_deferred": lambda v: tools_anthropic(v, deferred=True),
         "gemini": tools_gemini, "mcp": tools_mcp}
RESULTS = {"openai_chat": results_list(part_openai_chat), "openai_responses": results_list(part_openai_responses),
           "anthropic": results_anthropic, "gemini": results_list(part_gemini), "mcp": results_list(part_mcp)}


def run(what, fn, value):
    """One check, one line; any exception is a FAIL (genai raises AttributeError, not a
    ValidationError, for a type array)."""
    try:
        print(f"ok {what}: {fn(value)}")
        return True
    except ValidationError as e:
        errs = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors()[:5])
        print(f"FAIL {what}: {e.error_count()} validation error(s): {errs}")
    except Exception as e:
        print(f"FAIL {what}: {type(e).__name__}: {e}".replace("\n", " "))
    return False


def check(bundle):
    ok = True
    for section, table in (("tools", TOOLS), ("results", RESULTS)):
        for key, value in bundle.get(section, {}).items():
            fn = table.get(key) or (lambda v, key=key: reject(f"unknown format {key!r}"))
            ok &= run(f"{section}.{key}", fn, value)
    for key, values in bundle.get("parts", {}).items():
        fn = PARTS.get(key)
        if fn is None or not isinstance(values, list):
            ok &= run(f"parts.{key}", lambda v: reject("unknown format or not a list"), values)
            continue
        if key.endswith("_search") and len(values) != 1:
            ok &= run(f"parts.{key}", lambda v: reject(f"expected one part, got {len(v)}"), values)
        for i, p in enumerate(values):
            ok &= run(f"parts.{key}[{i}]", fn, p)
    return 0 if ok else 1


# ---------------------------------------------------------------- samples

def samples(calls):
    """Builds each provider's model response with the SDK's response models, so the dumped
    shapes are what a host would really hold."""
    chat = oc.ChatCompletion.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": c["id"], "type": "function", "function": {
                "name": c["name"], "arguments": json.dumps(c["arguments"])}} for c in calls]}}]})
    message = chat.choices[0].message
    assert all(isinstance(t, oc.ChatCompletionMessageFunctionToolCall) for t in message.tool_calls)

    def response(output):
        return orr.Response.model_validate({
            "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-test", "output": output,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "status": "completed"})

    resp = response([{"type": "reasoning", "id": "rs_1", "summary": []}] + [
        {"type": "function_call", "id": f"fc_{i + 1}", "call_id": c["id"], "name": c["name"],
         "arguments": json.dumps(c["arguments"]), "status": "completed"} for i, c in enumerate(calls)])
    assert isinstance(resp.output[0], orr.ResponseReasoningItem)
    assert all(isinstance(o, orr.ResponseFunctionToolCall) for o in resp.output[1:])
    search = response([{"type": "tool_search_call", "id": "tsc_1", "call_id": "ts_1", "execution": "client",
                        "arguments": {"query": "customer name"}, "status": "completed"}])
    assert isinstance(search.output[0], orr.ResponseToolSearchCall)

    msg = at.Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
        "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [{"type": "text", "text": "Let me look that up."}] + [
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["arguments"]} for c in calls]})
    assert all(isinstance(b, at.ToolUseBlock) for b in msg.content[1:])

    def gemini_call(i, c):
        name = "_" + c["name"] if c["name"][0].isdigit() or c["name"][0] == "-" else c["name"]
        # Only the first call carries an id: toolrouter must derive the others'.
        return gt.Part(function_call=gt.FunctionCall(name=name, args=c["arguments"], id=c["id"] if i == 0 else None))

    gen = gt.GenerateContentResponse(candidates=[gt.Candidate(finish_reason="STOP", content=gt.Content(
        role="model", parts=[gt.Part(text="Let me look that up.")] + [gemini_call(i, c) for i, c in enumerate(calls)]))])

    mcp_calls = [mt.CallToolRequestParams.model_validate(
        {"name": c["name"], "arguments": c["arguments"], "_meta": {"io.toolrouter/tool_call_id": c["id"]}}) for c in calls]

    return {
        "openai_chat": message.model_dump(mode="json", exclude_none=True),
        "openai_responses": [o.model_dump(mode="json", exclude_none=True) for o in resp.output],
        "anthropic": [b.model_dump(mode="json", exclude_none=True) for b in msg.content],
        "gemini": gen.candidates[0].content.model_dump(mode="json", by_alias=True, exclude_none=True),
        "mcp": [p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in mcp_calls],
        "openai_responses_search": [o.model_dump(mode="json", exclude_none=True) for o in search.output],
    }


def main():
    command = sys.argv[1] if len(sys.argv) == 2 else ""
    if command == "samples":
        print(json.dumps(samples(json.load(sys.stdin)["calls"])))
        return 0
    if command == "check":
        return check(json.load(sys.stdin))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
