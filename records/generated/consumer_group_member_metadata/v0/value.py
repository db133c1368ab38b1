# ruff: noqa: E501
"""Generated from ``common/message/ConsumerGroupMemberMetadataValue.json`` in Kafka's jar by coordinator.protocol.messagegen."""

import datetime
from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16, i32Timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicProtocol:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    """The protocol name."""
    metadata: bytes = field(metadata={"kafka_type": "bytes"})
    """The protocol metadata."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicMemberMetadata:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    session_timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The session timeout if the consumer uses the classic protocol."""
    supported_protocols: tuple[ClassicProtocol, ...]
    """The list of protocols that the member supports if the consumer uses the classic protocol."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMemberMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    instance_id: str | None = field(metadata={"kafka_type": "string"})
    """The (optional) instance id."""
    rack_id: str | None = field(metadata={"kafka_type": "string"})
    """The (optional) rack id."""
    client_id: str = field(metadata={"kafka_type": "string"})
    """The client id."""
    client_host: str = field(metadata={"kafka_type": "string"})
    """The client host."""
    subscribed_topic_names: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """The list of subscribed topic names."""
    subscribed_topic_regex: str | None = field(metadata={"kafka_type": "string"})
    """The subscribed topic regular expression."""
    rebalance_timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"}, default=i32Timedelta.parse(datetime.timedelta(milliseconds=-1)))
    """The rebalance timeout."""
    server_assignor: str | None = field(metadata={"kafka_type": "string"})
    """The server assignor to use; or null if not used."""
    classic_member_metadata: ClassicMemberMetadata | None = field(metadata={"tag": 0}, default=None)
    """The classic member metadata which includes the supported protocols of the consumer if it uses the classic protocol. The metadata is null if the consumer uses the consumer protocol."""
