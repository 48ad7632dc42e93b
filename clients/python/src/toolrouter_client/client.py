"""The host API: `Client` (blocking) and `AsyncClient` (asyncio), the same five calls each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
import grpc.aio

from toolrouter_client import _wire as w
from toolrouter_client._proto.toolrouter.v1 import router_pb2_grpc
from toolrouter_client.errors import from_rpc_error

__all__ = ["Client", "AsyncClient"]


def _metadata(api_key: str | None) -> tuple[tuple[str, str], ...]:
    if api_key is None:
        return ()
    return (("authorization", f"Bearer {w._text(api_key, 'api_key')}"),)


class Client:
    """A blocking client of toolrouter's Router service.

    `Client("127.0.0.1:50051")` opens a plaintext channel; pass `credentials`
    (`grpc.ssl_channel_credentials(...)`) for TLS, `api_key` for `authorization: Bearer`, or
    an existing `channel`. Every method raises a `ToolrouterError` subclass when the server
    refuses (with the BadRequest field paths in `.fields`) and `ClientInputError` naming the
    argument when the input is malformed (nothing is sent then).
    """

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        *,
        api_key: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        channel: grpc.Channel | None = None,
        timeout: float | None = 60.0,
    ) -> None:
        self._owned = channel is None
        if channel is None:
            channel = grpc.secure_channel(target, credentials) if credentials else grpc.insecure_channel(target)
        self._channel = channel
        self._stub = router_pb2_grpc.RouterStub(channel)
        self._metadata = _metadata(api_key)
        self._timeout = timeout

    def _call(self, method: Any, request: Any) -> Any:
        try:
            return method(request, metadata=self._metadata, timeout=self._timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e, e.trailing_metadata()) from None  # type: ignore[attr-defined]

    def get_model_tools(
        self, agent: w.AgentLike, run: w.RunLike, format: w.Format | None = None, *, defer_loading: bool = False
    ) -> w.ModelTools:
        """The tools to show the model, in `format`'s shape (`.tools`), and the instructions."""
        return w.model_tools(self._call(self._stub.GetModelTools, w.tools_request(agent, run, format, defer_loading)))

    def handle_tool_calls(self, agent: w.AgentLike, run: w.RunLike, calls: Sequence[Any] | dict[str, Any], format: w.Format) -> w.ToolCallsOutcome:
        """Handles the model's tool-call parts exactly as the provider returned them (or the
        whole assistant message); `.results` is what to append, `.deferred` what waits."""
        return w.calls_outcome(self._call(self._stub.HandleToolCalls, w.handle_request(agent, run, calls, format)))

    def handle_tool_call(
        self, agent: w.AgentLike, run: w.RunLike, tool_call_id: str, name: str, arguments: dict[str, Any], *, format: w.Format | None = None
    ) -> w.Outcome:
        """Handles one call already read from the model's response (its id, name and arguments)."""
        return w.outcome(self._call(self._stub.HandleToolCall, w.call_request(agent, run, tool_call_id, name, arguments, format)))

    def resolve(self, deferred_id: str, decision: w.Decision, *, format: w.Format | None = None) -> w.Resolution:
        """Approves, denies or answers (a client tool's result) one deferred call."""
        return w.resolution(self._call(self._stub.ResolveDeferred, w.resolve_request(deferred_id, decision, format)))

    def list_deferred(
        self, agent: str | None = None, run: w.RunLike | None = None, *, state: w.DeferredState | None = "pending", format: w.Format | None = None
    ) -> list[w.DeferredRecord]:
        """Deferred records (every page), filtered by agent, run and state (None: any state)."""
        records: list[w.DeferredRecord] = []
        token = ""
        while True:
            resp = self._call(self._stub.ListDeferred, w.list_request(agent, run, state, format, token))
            records += [w.record(rec) for rec in resp.records]
            token = resp.next_page_token
            if not token:
                return records

    def end_run(self, agent: str, run: w.RunLike) -> None:
        """Ends a run: releases its version pin and its MCP sessions."""
        self._call(self._stub.EndRun, w.end_run_request(agent, run))

    def close(self) -> None:
        if self._owned:
            self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """The asyncio twin of `Client` (grpc.aio); same arguments, same errors, awaitable methods."""

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        *,
        api_key: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        channel: grpc.aio.Channel | None = None,
        timeout: float | None = 60.0,
    ) -> None:
        self._owned = channel is None
        if channel is None:
            channel = grpc.aio.secure_channel(target, credentials) if credentials else grpc.aio.insecure_channel(target)
        self._channel = channel
        self._stub = router_pb2_grpc.RouterStub(channel)
        self._metadata = _metadata(api_key)
        self._timeout = timeout

    async def _call(self, method: Any, request: Any) -> Any:
        try:
            return await method(request, metadata=self._metadata, timeout=self._timeout)
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e, e.trailing_metadata()) from None

    async def get_model_tools(
        self, agent: w.AgentLike, run: w.RunLike, format: w.Format | None = None, *, defer_loading: bool = False
    ) -> w.ModelTools:
        return w.model_tools(await self._call(self._stub.GetModelTools, w.tools_request(agent, run, format, defer_loading)))

    async def handle_tool_calls(
        self, agent: w.AgentLike, run: w.RunLike, calls: Sequence[Any] | dict[str, Any], format: w.Format
    ) -> w.ToolCallsOutcome:
        return w.calls_outcome(await self._call(self._stub.HandleToolCalls, w.handle_request(agent, run, calls, format)))

    async def handle_tool_call(
        self, agent: w.AgentLike, run: w.RunLike, tool_call_id: str, name: str, arguments: dict[str, Any], *, format: w.Format | None = None
    ) -> w.Outcome:
        return w.outcome(await self._call(self._stub.HandleToolCall, w.call_request(agent, run, tool_call_id, name, arguments, format)))

    async def resolve(self, deferred_id: str, decision: w.Decision, *, format: w.Format | None = None) -> w.Resolution:
        return w.resolution(await self._call(self._stub.ResolveDeferred, w.resolve_request(deferred_id, decision, format)))

    async def list_deferred(
        self, agent: str | None = None, run: w.RunLike | None = None, *, state: w.DeferredState | None = "pending", format: w.Format | None = None
    ) -> list[w.DeferredRecord]:
        records: list[w.DeferredRecord] = []
        token = ""
        while True:
            resp = await self._call(self._stub.ListDeferred, w.list_request(agent, run, state, format, token))
            records += [w.record(rec) for rec in resp.records]
            token = resp.next_page_token
            if not token:
                return records

    async def end_run(self, agent: str, run: w.RunLike) -> None:
        await self._call(self._stub.EndRun, w.end_run_request(agent, run))

    async def close(self) -> None:
        if self._owned:
            await self._channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
