# ruff: noqa: E501
"""Generated from ``common/message/ShareGroupMemberMetadataValue.json`` in Kafka's jar by coordinator.protocol.messagegen."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMemberMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    rack_id: str | None = field(metadata={"kafka_type": "string"})
    """The (optional) rack id."""
    client_id: str = field(metadata={"kafka_type": "string"})
    """The client id."""
    client_host: str = field(metadata={"kafka_type": "string"})
    """The client host."""
    subscribed_topic_names: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """The list of subscribed topic names."""
