from toolrouter_client._proto.toolrouter.v1 import definition_pb2 as _definition_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExecuteRequest(_message.Message):
    __slots__ = ("tool", "arguments_json", "tool_call_id", "run")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    tool: str
    arguments_json: str
    tool_call_id: str
    run: _definition_pb2.RunContext
    def __init__(self, tool: _Optional[str] = ..., arguments_json: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., run: _Optional[_Union[_definition_pb2.RunContext, _Mapping]] = ...) -> None: ...

class ExecuteResponse(_message.Message):
    __slots__ = ("content_json", "is_error")
    CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    content_json: str
    is_error: bool
    def __init__(self, content_json: _Optional[str] = ..., is_error: _Optional[bool] = ...) -> None: ...

class ListToolsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListToolsResponse(_message.Message):
    __slots__ = ("tools",)
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[_definition_pb2.ToolDeclaration]
    def __init__(self, tools: _Optional[_Iterable[_Union[_definition_pb2.ToolDeclaration, _Mapping]]] = ...) -> None: ...
