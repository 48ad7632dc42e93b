"""Drives toolrouter's MCP endpoint on several replicas with the official Python MCP client
(mcp 2.x), every HTTP request going to the next replica in turn: initialize, notifications,
listings, calls, elicitation answers and the closing DELETE alike.

The configuration is one JSON object, the first argument (or, without one, the first line of
stdin):

    {"urls": [url_a, url_b, ...],          # the same endpoint path on each replica
     "mode": "2026-07-28" | "legacy",       # Client(mode=...): stateless, or a 2025-11-25 session
     "run_id": "...",                       # optional: _meta["io.toolrouter/run_id"] of every request
     "calls": [{"name": ..., "arguments": {...}, "tool_call_id": "..."?}, ...],
     "approve": true | false,               # optional: declare form elicitation and answer every
                                            # question {"action": "accept", "content": {"approve": ...}}
     "stop_after": n,                       # optional: pause after n calls (below)
     "pause_in_question": true,             # optional: pause when the first question is asked,
                                            # before it is answered
     "wire_bodies": true}                   # optional: the wire lines carry request and answer bodies
                                            # (JSON answers only; event streams are not read here)

With `stop_after` (after that many calls) or `pause_in_question`, the script prints the line
`PAUSED` and waits for a line on stdin: `{"urls": [...]}`, the replicas every later request
goes to (the test stops one replica meanwhile).

Prints one JSON object: the negotiated protocol version; the listed tools' names with the
listing's ttl_ms and cache_scope (as the SDK read them, and as they were on the wire); each
call's is_error, first text, structured content (or the JSON-RPC error it raised); the
elicitation questions received; the HTTP requests sent to each URL; every answer that was not
2xx; and the wire (one line per HTTP request)."""

import json
import sys
from typing import Any

import anyio
import httpx2
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

RUN_ID_META = "io.toolrouter/run_id"
CALL_ID_META = "io.toolrouter/tool_call_id"


class Alternating(httpx2.AsyncBaseTransport):
    """Sends each request to the next URL of `urls` in turn (scheme, host, port and path
    rewritten, `Host` too) and records where each went and what came back."""

    def __init__(self, urls: list[str], bodies: bool = False) -> None:
        self.bodies = bodies
        self.inner = httpx2.AsyncHTTPTransport()
        self.counts: dict[str, int] = {u: 0 for u in urls}
        self.non_2xx: list[dict[str, Any]] = []
        self.wire: list[dict[str, Any]] = []
        self.retarget(urls)

    def retarget(self, urls: list[str]) -> None:
        self.urls = list(urls)
        self.next = 0
        for u in urls:
            self.counts.setdefault(u, 0)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = self.urls[self.next % len(self.urls)]
        self.next += 1
        self.counts[url] += 1
        target = httpx2.URL(url)
        request.url = request.url.copy_with(scheme=target.scheme, host=target.host, port=target.port, path=target.path)
        request.headers["host"] = f"{target.host}:{target.port}" if target.port else target.host
        rpc = None
        if request.method == "POST":
            try:
                body = json.loads(request.content)
                rpc = body.get("method") or ("response to " + str(body.get("id")))
            except (ValueError, AttributeError):
                rpc = "?"
        entry: dict[str, Any] = {"url": url, "http": request.method, "rpc": rpc, "session": request.headers.get("mcp-session-id")}
        if self.bodies and request.method == "POST":
            entry["request"] = {"headers": dict(request.headers), "body": request.content.decode("utf-8", "replace")}
        self.wire.append(entry)
        try:
            response = await self.inner.handle_async_request(request)
        except httpx2.TransportError as e:
            entry["transport_error"] = repr(e)
            self.non_2xx.append(dict(entry))
            raise
        entry["status"] = response.status_code
        entry["content_type"] = response.headers.get("content-type")
        # A plain JSON answer is read here (event streams stay streams: the SDK answers
        # questions on them before they end) so listings' cache hints and errors are seen.
        if (response.headers.get("content-type") or "").startswith("application/json") or not 200 <= response.status_code < 300:
            raw = await response.aread()
            await response.aclose()
            text = raw.decode("utf-8", "replace")
            try:
                result = json.loads(text).get("result") if text else None
            except (ValueError, AttributeError):
                result = None
            if isinstance(result, dict):
                for key in ("ttlMs", "cacheScope", "resultType"):
                    if key in result:
                        entry[key] = result[key]
                if rpc in ("initialize", "server/discover"):
                    entry["result_keys"] = sorted(result)
            if not 200 <= response.status_code < 300 or self.bodies:
                entry["body"] = text[:4000]
            headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
            response = httpx2.Response(
                response.status_code,
                headers=headers,
                content=raw,
                request=request,
                extensions=response.extensions,
            )
        if not 200 <= response.status_code < 300:
            self.non_2xx.append(dict(entry))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def meta_of(run_id: str | None, call_id: str | None) -> dict[str, Any] | None:
    meta = {}
    if run_id:
        meta[RUN_ID_META] = run_id
    if call_id:
        meta[CALL_ID_META] = call_id
    return meta or None


def error_of(e: MCPError) -> dict[str, Any]:
    return {"code": e.code, "message": e.message, "data": getattr(e.error, "data", None)}


async def read_line() -> str:
    return await anyio.to_thread.run_sync(sys.stdin.readline)


async def main(config: dict[str, Any]) -> dict[str, Any]:
    urls = config["urls"]
    mode = config.get("mode", "2026-07-28")
    run_id = config.get("run_id")
    stop_after = config.get("stop_after")
    approve = config.get("approve")
    asked: list[dict[str, Any]] = []

    async def pause() -> None:
        print("PAUSED", flush=True)
        line = await read_line()
        alternating.retarget(json.loads(line)["urls"])
        report["resumed_at"] = len(alternating.wire)

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append({"message": getattr(params, "message", None), "schema": getattr(params, "requested_schema", None)})
        if config.get("pause_in_question") and len(asked) == 1:
            await pause()
        return types.ElicitResult(action="accept", content={"approve": bool(approve)})

    alternating = Alternating(urls, bool(config.get("wire_bodies")))
    http = httpx2.AsyncClient(transport=alternating, timeout=httpx2.Timeout(30.0, read=120.0))
    report: dict[str, Any] = {"mode": mode}
    results: list[dict[str, Any]] = []
    async with http:
        transport = streamable_http_client(urls[0], http_client=http)
        client = Client(transport, mode=mode, elicitation_callback=elicit if approve is not None else None)
        async with client:
            report["protocol_version"] = client.protocol_version
            report["instructions"] = client.instructions
            try:
                listed = await client.list_tools(meta=meta_of(run_id, None))
                report["tools"] = [t.name for t in listed.tools]
                report["ttl_ms"] = listed.ttl_ms
                scope = listed.cache_scope
                report["cache_scope"] = str(getattr(scope, "value", scope)) if scope is not None else None
            except MCPError as e:
                report["list_error"] = error_of(e)
            listing = [w for w in alternating.wire if w.get("rpc") == "tools/list"]
            report["wire_list"] = {k: listing[-1].get(k) for k in ("ttlMs", "cacheScope", "resultType")} if listing else None
            for n, call in enumerate(config.get("calls", [])):
                if stop_after is not None and n == stop_after:
                    await pause()
                try:
                    r = await client.call_tool(call["name"], call.get("arguments"), meta=meta_of(run_id, call.get("tool_call_id")))
                    texts = [c.text for c in r.content if getattr(c, "type", "") == "text"]
                    results.append({"is_error": bool(r.is_error), "text": texts[0] if texts else None, "structured": r.structured_content})
                except MCPError as e:
                    results.append({"is_error": True, "error": error_of(e)})
    report["results"] = results
    report["asked"] = asked
    report["requests"] = alternating.counts
    report["non_2xx"] = alternating.non_2xx
    report["wire"] = alternating.wire
    return report


def load_config() -> dict[str, Any]:
    if len(sys.argv) > 1:
        return json.loads(sys.argv[1])
    return json.loads(sys.stdin.readline())


if __name__ == "__main__":
    out = anyio.run(main, load_config())
    print(json.dumps(out), flush=True)
