import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from toolrouter_client._proto.toolrouter.v1 import definition_pb2 as _definition_pb2
from toolrouter_client._proto.toolrouter.v1 import discovery_pb2 as _discovery_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ToolFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOOL_FORMAT_UNSPECIFIED: _ClassVar[ToolFormat]
    TOOL_FORMAT_OPENAI_CHAT: _ClassVar[ToolFormat]
    TOOL_FORMAT_OPENAI_RESPONSES: _ClassVar[ToolFormat]
    TOOL_FORMAT_ANTHROPIC: _ClassVar[ToolFormat]
    TOOL_FORMAT_GEMINI: _ClassVar[ToolFormat]
    TOOL_FORMAT_MCP: _ClassVar[ToolFormat]

class ModelToolKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODEL_TOOL_KIND_UNSPECIFIED: _ClassVar[ModelToolKind]
    MODEL_TOOL_KIND_CONTROL: _ClassVar[ModelToolKind]
    MODEL_TOOL_KIND_DIRECT: _ClassVar[ModelToolKind]
    MODEL_TOOL_KIND_PINNED: _ClassVar[ModelToolKind]
    MODEL_TOOL_KIND_HOT: _ClassVar[ModelToolKind]

class DeferredKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEFERRED_KIND_UNSPECIFIED: _ClassVar[DeferredKind]
    DEFERRED_KIND_APPROVAL: _ClassVar[DeferredKind]
    DEFERRED_KIND_CLIENT_EXECUTION: _ClassVar[DeferredKind]
    DEFERRED_KIND_CONSENT: _ClassVar[DeferredKind]

class DeferredState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEFERRED_STATE_UNSPECIFIED: _ClassVar[DeferredState]
    DEFERRED_STATE_PENDING: _ClassVar[DeferredState]
    DEFERRED_STATE_RESOLVED: _ClassVar[DeferredState]
    DEFERRED_STATE_EXECUTING: _ClassVar[DeferredState]
    DEFERRED_STATE_EXPIRED: _ClassVar[DeferredState]
TOOL_FORMAT_UNSPECIFIED: ToolFormat
TOOL_FORMAT_OPENAI_CHAT: ToolFormat
TOOL_FORMAT_OPENAI_RESPONSES: ToolFormat
TOOL_FORMAT_ANTHROPIC: ToolFormat
TOOL_FORMAT_GEMINI: ToolFormat
TOOL_FORMAT_MCP: ToolFormat
MODEL_TOOL_KIND_UNSPECIFIED: ModelToolKind
MODEL_TOOL_KIND_CONTROL: ModelToolKind
MODEL_TOOL_KIND_DIRECT: ModelToolKind
MODEL_TOOL_KIND_PINNED: ModelToolKind
MODEL_TOOL_KIND_HOT: ModelToolKind
DEFERRED_KIND_UNSPECIFIED: DeferredKind
DEFERRED_KIND_APPROVAL: DeferredKind
DEFERRED_KIND_CLIENT_EXECUTION: DeferredKind
DEFERRED_KIND_CONSENT: DeferredKind
DEFERRED_STATE_UNSPECIFIED: DeferredState
DEFERRED_STATE_PENDING: DeferredState
DEFERRED_STATE_RESOLVED: DeferredState
DEFERRED_STATE_EXECUTING: DeferredState
DEFERRED_STATE_EXPIRED: DeferredState

class GetModelToolsRequest(_message.Message):
    __slots__ = ("agent", "run", "format", "defer_loading")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    DEFER_LOADING_FIELD_NUMBER: _ClassVar[int]
    agent: _definition_pb2.AgentRef
    run: _definition_pb2.RunContext
    format: ToolFormat
    defer_loading: bool
    def __init__(self, agent: _Optional[_Union[_definition_pb2.AgentRef, _Mapping]] = ..., run: _Optional[_Union[_definition_pb2.RunContext, _Mapping]] = ..., format: _Optional[_Union[ToolFormat, str]] = ..., defer_loading: _Optional[bool] = ...) -> None: ...

class ModelTool(_message.Message):
    __slots__ = ("name", "description", "input_schema_json", "kind", "group", "tool", "source_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    input_schema_json: str
    kind: ModelToolKind
    group: str
    tool: str
    source_id: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema_json: _Optional[str] = ..., kind: _Optional[_Union[ModelToolKind, str]] = ..., group: _Optional[str] = ..., tool: _Optional[str] = ..., source_id: _Optional[str] = ...) -> None: ...

class GetModelToolsResponse(_message.Message):
    __slots__ = ("tools", "instructions", "version", "diagnostics", "tools_json")
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_JSON_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[ModelTool]
    instructions: str
    version: int
    diagnostics: _containers.RepeatedScalarFieldContainer[str]
    tools_json: str
    def __init__(self, tools: _Optional[_Iterable[_Union[ModelTool, _Mapping]]] = ..., instructions: _Optional[str] = ..., version: _Optional[int] = ..., diagnostics: _Optional[_Iterable[str]] = ..., tools_json: _Optional[str] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("tool_call_id", "tool_name", "arguments_json")
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    tool_call_id: str
    tool_name: str
    arguments_json: str
    def __init__(self, tool_call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ("content_json", "is_error", "provider_json", "follow_up")
    CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_JSON_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_UP_FIELD_NUMBER: _ClassVar[int]
    content_json: str
    is_error: bool
    provider_json: str
    follow_up: DeferredCall
    def __init__(self, content_json: _Optional[str] = ..., is_error: _Optional[bool] = ..., provider_json: _Optional[str] = ..., follow_up: _Optional[_Union[DeferredCall, _Mapping]] = ...) -> None: ...

class CallTarget(_message.Message):
    __slots__ = ("group", "tool", "name", "source_id", "arguments_json", "definition")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    group: str
    tool: str
    name: str
    source_id: str
    arguments_json: str
    definition: _discovery_pb2.ToolEntry
    def __init__(self, group: _Optional[str] = ..., tool: _Optional[str] = ..., name: _Optional[str] = ..., source_id: _Optional[str] = ..., arguments_json: _Optional[str] = ..., definition: _Optional[_Union[_discovery_pb2.ToolEntry, _Mapping]] = ...) -> None: ...

class DeferredCall(_message.Message):
    __slots__ = ("deferred_id", "kind", "target", "original_call", "consent_url")
    DEFERRED_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_CALL_FIELD_NUMBER: _ClassVar[int]
    CONSENT_URL_FIELD_NUMBER: _ClassVar[int]
    deferred_id: str
    kind: DeferredKind
    target: CallTarget
    original_call: ToolCall
    consent_url: str
    def __init__(self, deferred_id: _Optional[str] = ..., kind: _Optional[_Union[DeferredKind, str]] = ..., target: _Optional[_Union[CallTarget, _Mapping]] = ..., original_call: _Optional[_Union[ToolCall, _Mapping]] = ..., consent_url: _Optional[str] = ...) -> None: ...

class HandleToolCallRequest(_message.Message):
    __slots__ = ("agent", "run", "call", "format")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    agent: _definition_pb2.AgentRef
    run: _definition_pb2.RunContext
    call: ToolCall
    format: ToolFormat
    def __init__(self, agent: _Optional[_Union[_definition_pb2.AgentRef, _Mapping]] = ..., run: _Optional[_Union[_definition_pb2.RunContext, _Mapping]] = ..., call: _Optional[_Union[ToolCall, _Mapping]] = ..., format: _Optional[_Union[ToolFormat, str]] = ...) -> None: ...

class HandleToolCallResponse(_message.Message):
    __slots__ = ("result", "deferred")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_FIELD_NUMBER: _ClassVar[int]
    result: ToolResult
    deferred: DeferredCall
    def __init__(self, result: _Optional[_Union[ToolResult, _Mapping]] = ..., deferred: _Optional[_Union[DeferredCall, _Mapping]] = ...) -> None: ...

class HandleToolCallsRequest(_message.Message):
    __slots__ = ("agent", "run", "calls", "format", "provider_calls_json")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_CALLS_JSON_FIELD_NUMBER: _ClassVar[int]
    agent: _definition_pb2.AgentRef
    run: _definition_pb2.RunContext
    calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    format: ToolFormat
    provider_calls_json: str
    def __init__(self, agent: _Optional[_Union[_definition_pb2.AgentRef, _Mapping]] = ..., run: _Optional[_Union[_definition_pb2.RunContext, _Mapping]] = ..., calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., format: _Optional[_Union[ToolFormat, str]] = ..., provider_calls_json: _Optional[str] = ...) -> None: ...

class HandleToolCallsResponse(_message.Message):
    __slots__ = ("outcomes", "provider_results_json")
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_RESULTS_JSON_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[HandleToolCallResponse]
    provider_results_json: str
    def __init__(self, outcomes: _Optional[_Iterable[_Union[HandleToolCallResponse, _Mapping]]] = ..., provider_results_json: _Optional[str] = ...) -> None: ...

class Approve(_message.Message):
    __slots__ = ("arguments_json",)
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    arguments_json: str
    def __init__(self, arguments_json: _Optional[str] = ...) -> None: ...

class Deny(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class ClientResult(_message.Message):
    __slots__ = ("content_json", "is_error")
    CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    content_json: str
    is_error: bool
    def __init__(self, content_json: _Optional[str] = ..., is_error: _Optional[bool] = ...) -> None: ...

class ResolveDeferredRequest(_message.Message):
    __slots__ = ("deferred_id", "approve", "deny", "client_result", "format")
    DEFERRED_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVE_FIELD_NUMBER: _ClassVar[int]
    DENY_FIELD_NUMBER: _ClassVar[int]
    CLIENT_RESULT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    deferred_id: str
    approve: Approve
    deny: Deny
    client_result: ClientResult
    format: ToolFormat
    def __init__(self, deferred_id: _Optional[str] = ..., approve: _Optional[_Union[Approve, _Mapping]] = ..., deny: _Optional[_Union[Deny, _Mapping]] = ..., client_result: _Optional[_Union[ClientResult, _Mapping]] = ..., format: _Optional[_Union[ToolFormat, str]] = ...) -> None: ...

class DeferredRecord(_message.Message):
    __slots__ = ("call", "agent_id", "version", "run_id", "state", "resolution", "result", "create_time", "resolve_time", "expire_time")
    CALL_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    call: DeferredCall
    agent_id: str
    version: int
    run_id: str
    state: DeferredState
    resolution: str
    result: ToolResult
    create_time: _timestamp_pb2.Timestamp
    resolve_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, call: _Optional[_Union[DeferredCall, _Mapping]] = ..., agent_id: _Optional[str] = ..., version: _Optional[int] = ..., run_id: _Optional[str] = ..., state: _Optional[_Union[DeferredState, str]] = ..., resolution: _Optional[str] = ..., result: _Optional[_Union[ToolResult, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., resolve_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListDeferredRequest(_message.Message):
    __slots__ = ("agent_id", "run_id", "state", "page_size", "page_token", "format")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    run_id: str
    state: DeferredState
    page_size: int
    page_token: str
    format: ToolFormat
    def __init__(self, agent_id: _Optional[str] = ..., run_id: _Optional[str] = ..., state: _Optional[_Union[DeferredState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., format: _Optional[_Union[ToolFormat, str]] = ...) -> None: ...

class ListDeferredResponse(_message.Message):
    __slots__ = ("records", "next_page_token")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[DeferredRecord]
    next_page_token: str
    def __init__(self, records: _Optional[_Iterable[_Union[DeferredRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class EndRunRequest(_message.Message):
    __slots__ = ("agent_id", "run_id")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    run_id: str
    def __init__(self, agent_id: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class EndRunResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RevokeTokensRequest(_message.Message):
    __slots__ = ("user_id", "source_id")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    source_id: str
    def __init__(self, user_id: _Optional[str] = ..., source_id: _Optional[str] = ...) -> None: ...

class RevokeTokensResponse(_message.Message):
    __slots__ = ("revoked",)
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    revoked: int
    def __init__(self, revoked: _Optional[int] = ...) -> None: ...
