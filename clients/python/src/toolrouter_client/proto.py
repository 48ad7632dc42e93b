"""The generated messages and stubs of every toolrouter service (grpcio), for calls the host API
does not wrap (AgentRegistry, Discovery, ToolExecutor, HandleToolCall with typed calls).

    from toolrouter_client.proto import registry_pb2, registry_pb2_grpc, definition_pb2
"""

from toolrouter_client._proto.toolrouter.v1 import (  # noqa: F401
    definition_pb2,
    discovery_pb2,
    discovery_pb2_grpc,
    executor_pb2,
    executor_pb2_grpc,
    registry_pb2,
    registry_pb2_grpc,
    router_pb2,
    router_pb2_grpc,
)
