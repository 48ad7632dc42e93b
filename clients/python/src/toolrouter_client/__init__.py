"""toolrouter's host library: the Router service's calls in a provider's shapes, sync and asyncio.

    from toolrouter_client import Client, Approve
    client = Client("127.0.0.1:50051")
    tools = client.get_model_tools("crm-agent", "run-1", format="openai_chat").tools
    out = client.handle_tool_calls("crm-agent", "run-1", assistant_message, format="openai_chat")

Generated stubs of every service are in `toolrouter_client.proto` (grpcio).
"""

from toolrouter_client._wire import (
    AgentLike,
    Approve,
    ClientResult,
    Decision,
    Deferred,
    DeferredRecord,
    Deny,
    Format,
    ModelTool,
    ModelTools,
    Outcome,
    Resolution,
    Result,
    Run,
    RunLike,
    ToolCallsOutcome,
)
from toolrouter_client.client import AsyncClient, Client
from toolrouter_client.errors import (
    ClientInputError,
    DeadlineExceededError,
    FailedPreconditionError,
    FieldViolation,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    ToolrouterError,
    UnauthenticatedError,
    UnavailableError,
)

__all__ = [
    "AgentLike", "Approve", "AsyncClient", "Client", "ClientInputError", "ClientResult", "DeadlineExceededError",
    "Decision", "Deferred", "DeferredRecord", "Deny", "FailedPreconditionError", "FieldViolation", "Format",
    "InvalidArgumentError", "ModelTool", "ModelTools", "NotFoundError", "Outcome", "PermissionDeniedError",
    "Resolution", "ResourceExhaustedError", "Result", "Run", "RunLike", "ToolCallsOutcome", "ToolrouterError",
    "UnauthenticatedError", "UnavailableError",
]
