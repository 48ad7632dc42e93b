"""Errors of the toolrouter client: refusals of the server as typed exceptions that carry the
field paths of its `google.rpc.BadRequest` details, and bad input caught before anything is sent."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

__all__ = [
    "ClientInputError",
    "FieldViolation",
    "ToolrouterError",
    "InvalidArgumentError",
    "NotFoundError",
    "FailedPreconditionError",
    "UnauthenticatedError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "UnavailableError",
    "DeadlineExceededError",
]


class ClientInputError(ValueError):
    """An argument of a client method is malformed; nothing was sent. `field` names it, in the
    method's own terms (`calls[0].id`, `run.identity["user_id"]`)."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


@dataclass(frozen=True)
class FieldViolation:
    """One entry of the server's `google.rpc.BadRequest`: the request field path and why."""

    field: str
    description: str


class ToolrouterError(Exception):
    """A call the server refused. `code` is the gRPC status code, `message` the server's
    message, `violations` the BadRequest field violations (empty when there are none) and
    `retry_after` the RetryInfo delay in seconds, if the server sent one."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        violations: tuple[FieldViolation, ...] = (),
        retry_after: float | None = None,
    ) -> None:
        self.code = code
        self.message = message
        self.violations = violations
        self.retry_after = retry_after
        text = f"{code.name}: {message}"
        if violations:
            text += " [" + "; ".join(f"{v.field}: {v.description}" for v in violations) + "]"
        super().__init__(text)

    @property
    def fields(self) -> list[str]:
        """The field paths the server named, e.g. `["provider_calls_json[0].id"]`."""
        return [v.field for v in self.violations]


class InvalidArgumentError(ToolrouterError):
    """INVALID_ARGUMENT: the request is malformed; `fields` says where."""


class NotFoundError(ToolrouterError):
    """NOT_FOUND: no such agent, version or deferred record (for this tenant)."""


class FailedPreconditionError(ToolrouterError):
    """FAILED_PRECONDITION: e.g. a tool call id reused for another call, a record already
    resolved differently or expired."""


class UnauthenticatedError(ToolrouterError):
    """UNAUTHENTICATED: missing or invalid credentials."""


class PermissionDeniedError(ToolrouterError):
    """PERMISSION_DENIED."""


class ResourceExhaustedError(ToolrouterError):
    """RESOURCE_EXHAUSTED: a rate or size limit; `retry_after` when the server says when."""


class UnavailableError(ToolrouterError):
    """UNAVAILABLE: the server is unreachable or shutting down; safe to retry with the same
    tool call ids (they run once)."""


class DeadlineExceededError(ToolrouterError):
    """DEADLINE_EXCEEDED."""


_BY_CODE: dict[grpc.StatusCode, type[ToolrouterError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
}

_DETAILS_KEY = "grpc-status-details-bin"


def _details(metadata: object) -> tuple[tuple[FieldViolation, ...], float | None]:
    """Decodes `grpc-status-details-bin` (a `google.rpc.Status`) from trailing metadata."""
    raw = None
    for key, value in metadata or ():  # type: ignore[attr-defined]
        if key == _DETAILS_KEY:
            raw = value
    if not isinstance(raw, bytes):
        return (), None
    status = status_pb2.Status()
    try:
        status.ParseFromString(raw)
    except Exception:  # noqa: BLE001 - undecodable details are ignored, the code and message stay
        return (), None
    violations: list[FieldViolation] = []
    retry_after = None
    for detail in status.details:
        detail: any_pb2.Any
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations += [FieldViolation(v.field, v.description) for v in bad.field_violations]
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            retry_after = info.retry_delay.seconds + info.retry_delay.nanos / 1e9
    return tuple(violations), retry_after


def from_rpc_error(error: grpc.RpcError, trailing_metadata: object) -> ToolrouterError:
    """The typed exception for a failed RPC (sync or asyncio)."""
    code = error.code()  # type: ignore[attr-defined]
    message = error.details() or ""  # type: ignore[attr-defined]
    violations, retry_after = _details(trailing_metadata)
    cls = _BY_CODE.get(code, ToolrouterError)
    return cls(code, message, violations, retry_after)
