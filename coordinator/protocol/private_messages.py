"""Wire schemas of kcoord's private client-assignor APIs (docs/design/client-assignors-spec.md §2).

Rules of this module:
- Kafka never shipped these messages (PR apache/kafka#14469 removed them before release),
  so kio has no classes for them. They are written here in kio's own shape (frozen
  dataclasses, `__flexible__`, `metadata={"kafka_type": ...}`) so that kio's reader and
  writer encode them and `checked.struct_step` walks them with its bounds checks before
  kio sees a byte, exactly like every Kafka API.
- No `from __future__ import annotations`: kio reads the field types at runtime.
- Every message is v0 and flexible from v0 (compact strings, tagged fields), as every new
  Kafka API since KIP-482.
- The top-level error field is `int16`, not kio's `error_code`: kio's writer calls
  `ErrorCode(...)`, which refuses the private codes 32700/32701 (private_apis.py).
- Field choices follow docs/design/client-assignors-spec.md §2/§7: versions int16, Reason and Error int8,
  ids strings, Prepare's InstanceId nullable, the heartbeat Assignment carries the
  metadata version beside its bytes (without it the bytes cannot be decoded).
"""
import datetime
import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta

CSA_HEARTBEAT = 32700                  # ConsumerGroupHeartbeat with ClientAssignors
CONSUMER_GROUP_PREPARE_ASSIGNMENT = 32701
CONSUMER_GROUP_INSTALL_ASSIGNMENT = 32702

_NO_TIMEOUT = i32Timedelta.parse(datetime.timedelta(milliseconds=-1))


# ------------------------------------------------------------- 32700 CsaHeartbeat
@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    """A topic id and some of its partitions (shared by every message here)."""
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CSA_HEARTBEAT)
    __header_schema__: ClassVar[type] = RequestHeader
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientAssignor:
    """One client-side assignor a member supports (docs/design/client-assignors-spec.md)."""
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CSA_HEARTBEAT)
    __header_schema__: ClassVar[type] = RequestHeader
    name: str = field(metadata={"kafka_type": "string"})
    minimum_version: i16 = field(metadata={"kafka_type": "int16"})
    maximum_version: i16 = field(metadata={"kafka_type": "int16"})
    reason: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    version: i16 = field(metadata={"kafka_type": "int16"})
    metadata: bytes = field(metadata={"kafka_type": "bytes"}, default=b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class CsaHeartbeatRequest:
    """ConsumerGroupHeartbeat v1's body plus ClientAssignors (before TopicPartitions, as
    the seed places it, L414-464)."""
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CSA_HEARTBEAT)
    __header_schema__: ClassVar[type] = RequestHeader
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rack_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rebalance_timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"}, default=_NO_TIMEOUT)
    subscribed_topic_names: tuple[str, ...] | None = field(metadata={"kafka_type": "string"}, default=None)
    subscribed_topic_regex: str | None = field(metadata={"kafka_type": "string"}, default=None)
    server_assignor: str | None = field(metadata={"kafka_type": "string"}, default=None)
    client_assignors: tuple[ClientAssignor, ...] | None = None
    topic_partitions: tuple[TopicPartitions, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CsaAssignment:
    """The member's assignment, with the assigner's per-member error and metadata."""
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CSA_HEARTBEAT)
    __header_schema__: ClassVar[type] = ResponseHeader
    topic_partitions: tuple[TopicPartitions, ...] = ()
    error: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    metadata_version: i16 = field(metadata={"kafka_type": "int16"}, default=i16(-1))
    metadata_bytes: bytes | None = field(metadata={"kafka_type": "bytes"}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class CsaHeartbeatResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CSA_HEARTBEAT)
    __header_schema__: ClassVar[type] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    member_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    heartbeat_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    assignment: CsaAssignment | None = None


# ------------------------------------------------- 32701 PrepareAssignment
@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareAssignmentRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONSUMER_GROUP_PREPARE_ASSIGNMENT)
    __header_schema__: ClassVar[type] = RequestHeader
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedMember:
    """One member as the assigner sees it. TopicPartitions is its current *target*
    (docs/design/client-assignors-spec.md: the stickiness input)."""
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONSUMER_GROUP_PREPARE_ASSIGNMENT)
    __header_schema__: ClassVar[type] = ResponseHeader
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rack_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    subscriptions: tuple[uuid.UUID, ...] = field(metadata={"kafka_type": "uuid"}, default=())
    assignor_version: i16 = field(metadata={"kafka_type": "int16"})
    assignor_reason: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    assignor_metadata: bytes = field(metadata={"kafka_type": "bytes"}, default=b"")
    topic_partitions: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMetadata:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONSUMER_GROUP_PREPARE_ASSIGNMENT)
    __header_schema__: ClassVar[type] = ResponseHeader
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = field(metadata={"kafka_type": "string"})
    num_partitions: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareAssignmentResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONSUMER_GROUP_PREPARE_ASSIGNMENT)
    __header_schema__: ClassVar[type] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    group_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    client_assignor_name: str = field(metadata={"kafka_type": "string"}, default="")
    members: tuple[PreparedMember, ...] = ()
    partition_metadata: tuple[PartitionMetadata, ...] = ()


# ------------------------------------------------- 32702 InstallAssignment
@dataclass(frozen=True, slots=True, kw_only=True)
class InstalledMember:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONSUMER_GROUP_INSTALL_ASSIGNMENT)
    __header_schema__: ClassVar[type] = RequestHeader
    member_id: str = field(metadata={"kafka_type": "string"})
    partitions: tuple[TopicPartitions, ...] = ()
    metadata_version: i16 = field(metadata={"kafka_type": "int16"}, default=i16(-1))
    metadata_bytes: bytes = field(metadata={"kafka_type": "bytes"}, default=b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallAssignmentRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONSUMER_GROUP_INSTALL_ASSIGNMENT)
    __header_schema__: ClassVar[type] = RequestHeader
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    group_epoch: i32 = field(metadata={"kafka_type": "int32"})
    error: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    members: tuple[InstalledMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallAssignmentResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONSUMER_GROUP_INSTALL_ASSIGNMENT)
    __header_schema__: ClassVar[type] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)


REQUESTS: dict[int, type] = {
    CSA_HEARTBEAT: CsaHeartbeatRequest,
    CONSUMER_GROUP_PREPARE_ASSIGNMENT: PrepareAssignmentRequest,
    CONSUMER_GROUP_INSTALL_ASSIGNMENT: InstallAssignmentRequest,
}
RESPONSES: dict[int, type] = {
    CSA_HEARTBEAT: CsaHeartbeatResponse,
    CONSUMER_GROUP_PREPARE_ASSIGNMENT: PrepareAssignmentResponse,
    CONSUMER_GROUP_INSTALL_ASSIGNMENT: InstallAssignmentResponse,
}
NAMES: dict[int, str] = {
    CSA_HEARTBEAT: "ConsumerGroupHeartbeatClientAssignors",
    CONSUMER_GROUP_PREPARE_ASSIGNMENT: "ConsumerGroupPrepareAssignment",
    CONSUMER_GROUP_INSTALL_ASSIGNMENT: "ConsumerGroupInstallAssignment",
}
