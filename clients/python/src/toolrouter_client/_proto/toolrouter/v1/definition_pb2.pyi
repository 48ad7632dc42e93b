import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Profile(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROFILE_GROUPED: _ClassVar[Profile]
    PROFILE_FLAT: _ClassVar[Profile]

class Ranking(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RANKING_KEYWORD: _ClassVar[Ranking]
    RANKING_NATURAL: _ClassVar[Ranking]

class Caller(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CALLER_MODEL: _ClassVar[Caller]
    CALLER_CODE: _ClassVar[Caller]
PROFILE_GROUPED: Profile
PROFILE_FLAT: Profile
RANKING_KEYWORD: Ranking
RANKING_NATURAL: Ranking
CALLER_MODEL: Caller
CALLER_CODE: Caller

class ToolDeclaration(_message.Message):
    __slots__ = ("name", "description", "input_schema_json", "output_schema_json", "requires_approval", "idempotent", "codeact_callable", "timeout")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_FIELD_NUMBER: _ClassVar[int]
    CODEACT_CALLABLE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    input_schema_json: str
    output_schema_json: str
    requires_approval: bool
    idempotent: bool
    codeact_callable: bool
    timeout: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema_json: _Optional[str] = ..., output_schema_json: _Optional[str] = ..., requires_approval: _Optional[bool] = ..., idempotent: _Optional[bool] = ..., codeact_callable: _Optional[bool] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class FunctionSource(_message.Message):
    __slots__ = ("endpoint", "tools", "timeout", "max_concurrency")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    tools: _containers.RepeatedCompositeFieldContainer[ToolDeclaration]
    timeout: _duration_pb2.Duration
    max_concurrency: int
    def __init__(self, endpoint: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[ToolDeclaration, _Mapping]]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_concurrency: _Optional[int] = ...) -> None: ...

class HeaderBinding(_message.Message):
    __slots__ = ("secret", "prefix")
    FROM_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    secret: str
    prefix: str
    def __init__(self, secret: _Optional[str] = ..., prefix: _Optional[str] = ..., **kwargs) -> None: ...

class McpSource(_message.Message):
    __slots__ = ("url", "headers", "allowed_tools", "timeout", "max_concurrency", "approval_required", "idempotent_tools", "codeact_callable", "oauth")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: HeaderBinding
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[HeaderBinding, _Mapping]] = ...) -> None: ...
    URL_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_TOOLS_FIELD_NUMBER: _ClassVar[int]
    CODEACT_CALLABLE_FIELD_NUMBER: _ClassVar[int]
    OAUTH_FIELD_NUMBER: _ClassVar[int]
    url: str
    headers: _containers.MessageMap[str, HeaderBinding]
    allowed_tools: _containers.RepeatedScalarFieldContainer[str]
    timeout: _duration_pb2.Duration
    max_concurrency: int
    approval_required: _containers.RepeatedScalarFieldContainer[str]
    idempotent_tools: _containers.RepeatedScalarFieldContainer[str]
    codeact_callable: _containers.RepeatedScalarFieldContainer[str]
    oauth: McpOAuth
    def __init__(self, url: _Optional[str] = ..., headers: _Optional[_Mapping[str, HeaderBinding]] = ..., allowed_tools: _Optional[_Iterable[str]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_concurrency: _Optional[int] = ..., approval_required: _Optional[_Iterable[str]] = ..., idempotent_tools: _Optional[_Iterable[str]] = ..., codeact_callable: _Optional[_Iterable[str]] = ..., oauth: _Optional[_Union[McpOAuth, _Mapping]] = ...) -> None: ...

class McpOAuth(_message.Message):
    __slots__ = ("client_id", "scopes", "client_secret")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SECRET_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    client_secret: str
    def __init__(self, client_id: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., client_secret: _Optional[str] = ...) -> None: ...

class ClientSource(_message.Message):
    __slots__ = ("tools",)
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[ToolDeclaration]
    def __init__(self, tools: _Optional[_Iterable[_Union[ToolDeclaration, _Mapping]]] = ...) -> None: ...

class ToolSource(_message.Message):
    __slots__ = ("id", "instructions", "tool_configs", "function", "mcp", "client")
    class ToolConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ToolConfig
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ToolConfig, _Mapping]] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    MCP_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    instructions: str
    tool_configs: _containers.MessageMap[str, ToolConfig]
    function: FunctionSource
    mcp: McpSource
    client: ClientSource
    def __init__(self, id: _Optional[str] = ..., instructions: _Optional[str] = ..., tool_configs: _Optional[_Mapping[str, ToolConfig]] = ..., function: _Optional[_Union[FunctionSource, _Mapping]] = ..., mcp: _Optional[_Union[McpSource, _Mapping]] = ..., client: _Optional[_Union[ClientSource, _Mapping]] = ...) -> None: ...

class ToolConfig(_message.Message):
    __slots__ = ("pin", "additional_search_text")
    PIN_FIELD_NUMBER: _ClassVar[int]
    ADDITIONAL_SEARCH_TEXT_FIELD_NUMBER: _ClassVar[int]
    pin: bool
    additional_search_text: str
    def __init__(self, pin: _Optional[bool] = ..., additional_search_text: _Optional[str] = ...) -> None: ...

class ToolGroup(_message.Message):
    __slots__ = ("description", "source_ids")
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_IDS_FIELD_NUMBER: _ClassVar[int]
    description: str
    source_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, description: _Optional[str] = ..., source_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ControlNames(_message.Message):
    __slots__ = ("discover", "describe", "call", "list_tools", "list_groups", "search")
    DISCOVER_FIELD_NUMBER: _ClassVar[int]
    DESCRIBE_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    LIST_TOOLS_FIELD_NUMBER: _ClassVar[int]
    LIST_GROUPS_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    discover: str
    describe: str
    call: str
    list_tools: str
    list_groups: str
    search: str
    def __init__(self, discover: _Optional[str] = ..., describe: _Optional[str] = ..., call: _Optional[str] = ..., list_tools: _Optional[str] = ..., list_groups: _Optional[str] = ..., search: _Optional[str] = ...) -> None: ...

class AutoPinConfig(_message.Message):
    __slots__ = ("disabled", "warmup_calls", "max_hot", "half_life")
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    WARMUP_CALLS_FIELD_NUMBER: _ClassVar[int]
    MAX_HOT_FIELD_NUMBER: _ClassVar[int]
    HALF_LIFE_FIELD_NUMBER: _ClassVar[int]
    disabled: bool
    warmup_calls: int
    max_hot: int
    half_life: _duration_pb2.Duration
    def __init__(self, disabled: _Optional[bool] = ..., warmup_calls: _Optional[int] = ..., max_hot: _Optional[int] = ..., half_life: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ControlConfig(_message.Message):
    __slots__ = ("names", "max_results", "max_search_bytes", "disable_instructions", "profile", "ranking", "auto_pin")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    MAX_SEARCH_BYTES_FIELD_NUMBER: _ClassVar[int]
    DISABLE_INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    RANKING_FIELD_NUMBER: _ClassVar[int]
    AUTO_PIN_FIELD_NUMBER: _ClassVar[int]
    names: ControlNames
    max_results: int
    max_search_bytes: int
    disable_instructions: bool
    profile: Profile
    ranking: Ranking
    auto_pin: AutoPinConfig
    def __init__(self, names: _Optional[_Union[ControlNames, _Mapping]] = ..., max_results: _Optional[int] = ..., max_search_bytes: _Optional[int] = ..., disable_instructions: _Optional[bool] = ..., profile: _Optional[_Union[Profile, str]] = ..., ranking: _Optional[_Union[Ranking, str]] = ..., auto_pin: _Optional[_Union[AutoPinConfig, _Mapping]] = ...) -> None: ...

class AgentDefinition(_message.Message):
    __slots__ = ("sources", "groups", "control", "instructions", "deferred_ttl")
    class GroupsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ToolGroup
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ToolGroup, _Mapping]] = ...) -> None: ...
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_TTL_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[ToolSource]
    groups: _containers.MessageMap[str, ToolGroup]
    control: ControlConfig
    instructions: str
    deferred_ttl: _duration_pb2.Duration
    def __init__(self, sources: _Optional[_Iterable[_Union[ToolSource, _Mapping]]] = ..., groups: _Optional[_Mapping[str, ToolGroup]] = ..., control: _Optional[_Union[ControlConfig, _Mapping]] = ..., instructions: _Optional[str] = ..., deferred_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class AgentVersion(_message.Message):
    __slots__ = ("agent_id", "version", "is_default", "definition", "create_time", "embeddings_ready")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EMBEDDINGS_READY_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    version: int
    is_default: bool
    definition: AgentDefinition
    create_time: _timestamp_pb2.Timestamp
    embeddings_ready: bool
    def __init__(self, agent_id: _Optional[str] = ..., version: _Optional[int] = ..., is_default: _Optional[bool] = ..., definition: _Optional[_Union[AgentDefinition, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., embeddings_ready: _Optional[bool] = ...) -> None: ...

class AgentRef(_message.Message):
    __slots__ = ("agent_id", "version")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    version: int
    def __init__(self, agent_id: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class RunContext(_message.Message):
    __slots__ = ("run_id", "identity", "attributes", "caller")
    class IdentityEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    identity: _containers.ScalarMap[str, str]
    attributes: _containers.ScalarMap[str, str]
    caller: Caller
    def __init__(self, run_id: _Optional[str] = ..., identity: _Optional[_Mapping[str, str]] = ..., attributes: _Optional[_Mapping[str, str]] = ..., caller: _Optional[_Union[Caller, str]] = ...) -> None: ...
