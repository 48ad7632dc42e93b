import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from toolrouter_client._proto.toolrouter.v1 import definition_pb2 as _definition_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateAgentVersionRequest(_message.Message):
    __slots__ = ("agent_id", "definition", "make_default")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    MAKE_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    definition: _definition_pb2.AgentDefinition
    make_default: bool
    def __init__(self, agent_id: _Optional[str] = ..., definition: _Optional[_Union[_definition_pb2.AgentDefinition, _Mapping]] = ..., make_default: _Optional[bool] = ...) -> None: ...

class GetAgentVersionRequest(_message.Message):
    __slots__ = ("agent_id", "version")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    version: int
    def __init__(self, agent_id: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class Agent(_message.Message):
    __slots__ = ("agent_id", "default_version", "latest_version", "create_time", "update_time")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_VERSION_FIELD_NUMBER: _ClassVar[int]
    LATEST_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    default_version: int
    latest_version: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, agent_id: _Optional[str] = ..., default_version: _Optional[int] = ..., latest_version: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListAgentsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAgentsResponse(_message.Message):
    __slots__ = ("agents", "next_page_token")
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[Agent]
    next_page_token: str
    def __init__(self, agents: _Optional[_Iterable[_Union[Agent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListAgentVersionsRequest(_message.Message):
    __slots__ = ("agent_id", "page_size", "page_token")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    page_size: int
    page_token: str
    def __init__(self, agent_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAgentVersionsResponse(_message.Message):
    __slots__ = ("versions", "next_page_token")
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[_definition_pb2.AgentVersion]
    next_page_token: str
    def __init__(self, versions: _Optional[_Iterable[_Union[_definition_pb2.AgentVersion, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SetDefaultVersionRequest(_message.Message):
    __slots__ = ("agent_id", "version")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    version: int
    def __init__(self, agent_id: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class DeleteAgentRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class DeleteAgentResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
