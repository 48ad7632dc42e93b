from toolrouter_client._proto.toolrouter.v1 import definition_pb2 as _definition_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Detail(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DETAIL_AUTO: _ClassVar[Detail]
    DETAIL_SUMMARY: _ClassVar[Detail]
    DETAIL_FULL: _ClassVar[Detail]

class ToolKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOOL_KIND_UNSPECIFIED: _ClassVar[ToolKind]
    TOOL_KIND_FUNCTION: _ClassVar[ToolKind]
    TOOL_KIND_MCP: _ClassVar[ToolKind]
    TOOL_KIND_CLIENT: _ClassVar[ToolKind]
DETAIL_AUTO: Detail
DETAIL_SUMMARY: Detail
DETAIL_FULL: Detail
TOOL_KIND_UNSPECIFIED: ToolKind
TOOL_KIND_FUNCTION: ToolKind
TOOL_KIND_MCP: ToolKind
TOOL_KIND_CLIENT: ToolKind

class ToolEntry(_message.Message):
    __slots__ = ("group", "tool", "name", "description", "parameters_json_schema", "output_schema_json", "instructions", "kind", "requires_approval")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    group: str
    tool: str
    name: str
    description: str
    parameters_json_schema: str
    output_schema_json: str
    instructions: str
    kind: ToolKind
    requires_approval: bool
    def __init__(self, group: _Optional[str] = ..., tool: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., parameters_json_schema: _Optional[str] = ..., output_schema_json: _Optional[str] = ..., instructions: _Optional[str] = ..., kind: _Optional[_Union[ToolKind, str]] = ..., requires_approval: _Optional[bool] = ...) -> None: ...

class DiscoverToolsRequest(_message.Message):
    __slots__ = ("agent", "query", "group", "detail", "limit", "offset", "run")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    agent: _definition_pb2.AgentRef
    query: str
    group: str
    detail: Detail
    limit: int
    offset: int
    run: _definition_pb2.RunContext
    def __init__(self, agent: _Optional[_Union[_definition_pb2.AgentRef, _Mapping]] = ..., query: _Optional[str] = ..., group: _Optional[str] = ..., detail: _Optional[_Union[Detail, str]] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ..., run: _Optional[_Union[_definition_pb2.RunContext, _Mapping]] = ...) -> None: ...

class DiscoverToolsResponse(_message.Message):
    __slots__ = ("detail", "tools", "total", "next_offset", "content_json")
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    detail: Detail
    tools: _containers.RepeatedCompositeFieldContainer[ToolEntry]
    total: int
    next_offset: int
    content_json: str
    def __init__(self, detail: _Optional[_Union[Detail, str]] = ..., tools: _Optional[_Iterable[_Union[ToolEntry, _Mapping]]] = ..., total: _Optional[int] = ..., next_offset: _Optional[int] = ..., content_json: _Optional[str] = ...) -> None: ...

class DescribeToolRequest(_message.Message):
    __slots__ = ("agent", "group", "tool", "run")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    agent: _definition_pb2.AgentRef
    group: str
    tool: str
    run: _definition_pb2.RunContext
    def __init__(self, agent: _Optional[_Union[_definition_pb2.AgentRef, _Mapping]] = ..., group: _Optional[str] = ..., tool: _Optional[str] = ..., run: _Optional[_Union[_definition_pb2.RunContext, _Mapping]] = ...) -> None: ...

class DescribeToolResponse(_message.Message):
    __slots__ = ("tool", "content_json")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    tool: ToolEntry
    content_json: str
    def __init__(self, tool: _Optional[_Union[ToolEntry, _Mapping]] = ..., content_json: _Optional[str] = ...) -> None: ...

class ListToolGroupsRequest(_message.Message):
    __slots__ = ("agent", "limit", "offset", "run")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    agent: _definition_pb2.AgentRef
    limit: int
    offset: int
    run: _definition_pb2.RunContext
    def __init__(self, agent: _Optional[_Union[_definition_pb2.AgentRef, _Mapping]] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ..., run: _Optional[_Union[_definition_pb2.RunContext, _Mapping]] = ...) -> None: ...

class GroupEntry(_message.Message):
    __slots__ = ("group", "description", "tool_count")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TOOL_COUNT_FIELD_NUMBER: _ClassVar[int]
    group: str
    description: str
    tool_count: int
    def __init__(self, group: _Optional[str] = ..., description: _Optional[str] = ..., tool_count: _Optional[int] = ...) -> None: ...

class ListToolGroupsResponse(_message.Message):
    __slots__ = ("groups", "total", "next_offset", "content_json")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[GroupEntry]
    total: int
    next_offset: int
    content_json: str
    def __init__(self, groups: _Optional[_Iterable[_Union[GroupEntry, _Mapping]]] = ..., total: _Optional[int] = ..., next_offset: _Optional[int] = ..., content_json: _Optional[str] = ...) -> None: ...

class ListCatalogToolsRequest(_message.Message):
    __slots__ = ("agent", "group", "detail", "limit", "offset", "run")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    agent: _definition_pb2.AgentRef
    group: str
    detail: Detail
    limit: int
    offset: int
    run: _definition_pb2.RunContext
    def __init__(self, agent: _Optional[_Union[_definition_pb2.AgentRef, _Mapping]] = ..., group: _Optional[str] = ..., detail: _Optional[_Union[Detail, str]] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ..., run: _Optional[_Union[_definition_pb2.RunContext, _Mapping]] = ...) -> None: ...

class ListCatalogToolsResponse(_message.Message):
    __slots__ = ("detail", "tools", "total", "next_offset", "content_json")
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    detail: Detail
    tools: _containers.RepeatedCompositeFieldContainer[ToolEntry]
    total: int
    next_offset: int
    content_json: str
    def __init__(self, detail: _Optional[_Union[Detail, str]] = ..., tools: _Optional[_Iterable[_Union[ToolEntry, _Mapping]]] = ..., total: _Optional[int] = ..., next_offset: _Optional[int] = ..., content_json: _Optional[str] = ...) -> None: ...
