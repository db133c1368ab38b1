# ruff: noqa: E501
"""Generated from ``common/message/StreamsGroupMemberMetadataValue.json`` in Kafka's jar by coordinator.protocol.messagegen."""

import datetime
from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, u16


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    host: str = field(metadata={"kafka_type": "string"})
    """The host of the endpoint."""
    port: u16 = field(metadata={"kafka_type": "uint16"})
    """The port of the endpoint."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    key: str = field(metadata={"kafka_type": "string"})
    """The key of the config."""
    value: str = field(metadata={"kafka_type": "string"})
    """the value of the config."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupMemberMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    instance_id: str | None = field(metadata={"kafka_type": "string"})
    """The (optional) instance ID for static membership."""
    rack_id: str | None = field(metadata={"kafka_type": "string"})
    """The (optional) rack ID."""
    client_id: str = field(metadata={"kafka_type": "string"})
    """The client ID."""
    client_host: str = field(metadata={"kafka_type": "string"})
    """The client host."""
    rebalance_timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"}, default=i32Timedelta.parse(datetime.timedelta(milliseconds=-1)))
    """The rebalance timeout."""
    topology_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The epoch of the topology."""
    process_id: str = field(metadata={"kafka_type": "string"})
    """Identity of the streams instance that may have multiple consumers."""
    user_endpoint: Endpoint | None = None
    """User-defined endpoint for running interactive queries on this instance."""
    client_tags: tuple[KeyValue, ...]
    """Used for rack-aware assignment algorithm."""
