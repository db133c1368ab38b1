"""Wire schemas of the `connect` group APIs (docs/design/connect-groups-spec.md §1): keys 32703-32706.

Rules of this module (the same as private_messages.py, whose shape it follows):
- Kafka never shipped these messages (Connect 4.3 speaks only the classic protocol), so
  kio has no classes for them; they are written in kio's shape (frozen dataclasses,
  `__flexible__`, `metadata={"kafka_type": ...}`) so that kio reads and writes them and
  `checked.struct_step` bounds-checks them before kio sees a byte.
- No `from __future__ import annotations`: kio reads the field types at runtime.
- Every message is v0, flexible from v0. Top-level error fields are `int16` (kio's
  `ErrorCode` refuses the private codes 32700/32701).
- The seed's shapes are settled as docs/design/connect-groups-spec.md §1 says: `ConnectorsAndTasks` is one
  struct {Connectors []string, Tasks []ConnectorTaskId} (the seed declares it an array in
  some places and a `[]String` with fields in another, 001:L285, L371, L524-531);
  `ConnectorTaskId` = {Connector string, Task int32}, never defined by the seed (L80-82);
  versions are int16 (L532 says int32); MemberId is client-generated (L308 overrides L253).
  Prepare's request schema is missing from the seed and mirrors 000:L582-597.
- ConnectGroupDescribe (32706) is kcoord's addition, modelled on ConsumerGroupDescribe;
  it carries each worker's metadata so tools can show the url the seed's data model
  gives a worker (L49) but no wire field carries.
"""
import datetime
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta

CONNECT_GROUP_HEARTBEAT = 32703
CONNECT_GROUP_PREPARE_ASSIGNMENT = 32704
CONNECT_GROUP_INSTALL_ASSIGNMENT = 32705
CONNECT_GROUP_DESCRIBE = 32706

_NO_TIMEOUT = i32Timedelta.parse(datetime.timedelta(milliseconds=-1))



# ------------------------------------------------------------- 32703 heartbeat
@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectorTaskId:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_HEARTBEAT)
    __header_schema__: ClassVar[type] = RequestHeader
    connector: str = field(metadata={"kafka_type": "string"})
    task: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectorsAndTasks:
    """Connectors and tasks a worker owns, or is assigned (001:L285-296)."""
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_HEARTBEAT)
    __header_schema__: ClassVar[type] = RequestHeader
    connectors: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    tasks: tuple[ConnectorTaskId, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectAssignor:
    """One client-side assignor a worker supports (001:L271-283)."""
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_HEARTBEAT)
    __header_schema__: ClassVar[type] = RequestHeader
    name: str = field(metadata={"kafka_type": "string"})
    minimum_version: i16 = field(metadata={"kafka_type": "int16"})
    maximum_version: i16 = field(metadata={"kafka_type": "int16"})
    reason: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    version: i16 = field(metadata={"kafka_type": "int16"})
    metadata: bytes = field(metadata={"kafka_type": "bytes"}, default=b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectGroupHeartbeatRequest:
    """001:L242-297. Null fields mean "unchanged since the last heartbeat"."""
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_HEARTBEAT)
    __header_schema__: ClassVar[type] = RequestHeader
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rebalance_timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"}, default=_NO_TIMEOUT)
    server_assignor: str | None = field(metadata={"kafka_type": "string"}, default=None)
    client_assignors: tuple[ConnectAssignor, ...] | None = None
    connectors_and_tasks: ConnectorsAndTasks | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectAssignment:
    """001:L366-384: the units, the assigner's error for this worker, and its metadata."""
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_HEARTBEAT)
    __header_schema__: ClassVar[type] = ResponseHeader
    error: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    connectors_and_tasks: ConnectorsAndTasks = ConnectorsAndTasks()
    version: i16 = field(metadata={"kafka_type": "int16"}, default=i16(-1))
    metadata: bytes = field(metadata={"kafka_type": "bytes"}, default=b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectGroupHeartbeatResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_HEARTBEAT)
    __header_schema__: ClassVar[type] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    member_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    heartbeat_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    assignment: ConnectAssignment | None = None


# ------------------------------------------------------------- 32704 prepare
@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectPrepareAssignmentRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_PREPARE_ASSIGNMENT)
    __header_schema__: ClassVar[type] = RequestHeader
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectPreparedMember:
    """One worker as the assigner sees it (001:L463-485). ConnectorsAndTasks is its current
    *target*, the stickiness input."""
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_PREPARE_ASSIGNMENT)
    __header_schema__: ClassVar[type] = ResponseHeader
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    assignor_version: i16 = field(metadata={"kafka_type": "int16"})
    assignor_reason: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    assignor_metadata: bytes = field(metadata={"kafka_type": "bytes"}, default=b"")
    connectors_and_tasks: ConnectorsAndTasks = ConnectorsAndTasks()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectPrepareAssignmentResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_PREPARE_ASSIGNMENT)
    __header_schema__: ClassVar[type] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    group_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    assignor_name: str = field(metadata={"kafka_type": "string"}, default="")
    members: tuple[ConnectPreparedMember, ...] = ()


# ------------------------------------------------------------- 32705 install
@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectInstalledMember:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_INSTALL_ASSIGNMENT)
    __header_schema__: ClassVar[type] = RequestHeader
    member_id: str = field(metadata={"kafka_type": "string"})
    connectors_and_tasks: ConnectorsAndTasks = ConnectorsAndTasks()
    version: i16 = field(metadata={"kafka_type": "int16"}, default=i16(-1))
    metadata: bytes = field(metadata={"kafka_type": "bytes"}, default=b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectInstallAssignmentRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_INSTALL_ASSIGNMENT)
    __header_schema__: ClassVar[type] = RequestHeader
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    group_epoch: i32 = field(metadata={"kafka_type": "int32"})
    error: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    members: tuple[ConnectInstalledMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectInstallAssignmentResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_INSTALL_ASSIGNMENT)
    __header_schema__: ClassVar[type] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)


# ------------------------------------------------------------- 32706 describe
@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectGroupDescribeRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_DESCRIBE)
    __header_schema__: ClassVar[type] = RequestHeader
    group_ids: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectDescribedMember:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_DESCRIBE)
    __header_schema__: ClassVar[type] = ResponseHeader
    member_id: str = field(metadata={"kafka_type": "string"})
    instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    client_id: str = field(metadata={"kafka_type": "string"}, default="")
    client_host: str = field(metadata={"kafka_type": "string"}, default="")
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    state: str = field(metadata={"kafka_type": "string"}, default="")
    # Owned units, those pending revocation included (as ConsumerGroupDescribe describes them).
    assignment: ConnectorsAndTasks = ConnectorsAndTasks()
    target_assignment: ConnectorsAndTasks = ConnectorsAndTasks()
    metadata_version: i16 = field(metadata={"kafka_type": "int16"}, default=i16(-1))
    metadata: bytes = field(metadata={"kafka_type": "bytes"}, default=b"")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectDescribedGroup:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_DESCRIBE)
    __header_schema__: ClassVar[type] = ResponseHeader
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    group_id: str = field(metadata={"kafka_type": "string"})
    group_state: str = field(metadata={"kafka_type": "string"}, default="")
    group_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(0))
    assignment_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(0))
    assignor_name: str = field(metadata={"kafka_type": "string"}, default="")
    members: tuple[ConnectDescribedMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectGroupDescribeResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONNECT_GROUP_DESCRIBE)
    __header_schema__: ClassVar[type] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    groups: tuple[ConnectDescribedGroup, ...] = ()


REQUESTS: dict[int, type] = {
    CONNECT_GROUP_HEARTBEAT: ConnectGroupHeartbeatRequest,
    CONNECT_GROUP_PREPARE_ASSIGNMENT: ConnectPrepareAssignmentRequest,
    CONNECT_GROUP_INSTALL_ASSIGNMENT: ConnectInstallAssignmentRequest,
    CONNECT_GROUP_DESCRIBE: ConnectGroupDescribeRequest,
}
RESPONSES: dict[int, type] = {
    CONNECT_GROUP_HEARTBEAT: ConnectGroupHeartbeatResponse,
    CONNECT_GROUP_PREPARE_ASSIGNMENT: ConnectPrepareAssignmentResponse,
    CONNECT_GROUP_INSTALL_ASSIGNMENT: ConnectInstallAssignmentResponse,
    CONNECT_GROUP_DESCRIBE: ConnectGroupDescribeResponse,
}
NAMES: dict[int, str] = {
    CONNECT_GROUP_HEARTBEAT: "ConnectGroupHeartbeat",
    CONNECT_GROUP_PREPARE_ASSIGNMENT: "ConnectGroupPrepareAssignment",
    CONNECT_GROUP_INSTALL_ASSIGNMENT: "ConnectGroupInstallAssignment",
    CONNECT_GROUP_DESCRIBE: "ConnectGroupDescribe",
}


# ------------------------------------------------------------- builders
# The group core answers with these: plain ints and milliseconds in, kio's primitive types
# out, in one place (the private codes 32700/32701 are no kio ErrorCode).
_ZERO = i32Timedelta.parse(datetime.timedelta(0))


def _ms(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


def connectors_and_tasks(connectors, tasks) -> ConnectorsAndTasks:
    """`connectors`: names; `tasks`: (connector, task) pairs."""
    return ConnectorsAndTasks(connectors=tuple(connectors),
                              tasks=tuple(ConnectorTaskId(connector=c, task=i32(t)) for c, t in tasks))


def heartbeat_response(*, error_code: int, error_message: str | None = None, member_id: str | None = None,
                       member_epoch: int = -1, interval_ms: int = 0,
                       assignment: ConnectAssignment | None = None) -> ConnectGroupHeartbeatResponse:
    return ConnectGroupHeartbeatResponse(throttle_time=_ZERO, error_code=i16(error_code), error_message=error_message,
                                         member_id=member_id, member_epoch=i32(member_epoch),
                                         heartbeat_interval=_ms(interval_ms), assignment=assignment)


def assignment(*, error: int, units: ConnectorsAndTasks, version: int, metadata: bytes) -> ConnectAssignment:
    return ConnectAssignment(error=i8(error), connectors_and_tasks=units, version=i16(version), metadata=metadata)


def prepare_response(*, error_code: int, error_message: str | None = None, group_epoch: int = -1,
                     assignor_name: str = "", members: tuple[ConnectPreparedMember, ...] = ()
                     ) -> ConnectPrepareAssignmentResponse:
    return ConnectPrepareAssignmentResponse(throttle_time=_ZERO, error_code=i16(error_code),
                                            error_message=error_message, group_epoch=i32(group_epoch),
                                            assignor_name=assignor_name, members=members)


def prepared_member(*, member_id: str, member_epoch: int, instance_id: str | None, version: int, reason: int,
                    metadata: bytes, units: ConnectorsAndTasks) -> ConnectPreparedMember:
    return ConnectPreparedMember(member_id=member_id, member_epoch=i32(member_epoch), instance_id=instance_id,
                                 assignor_version=i16(version), assignor_reason=i8(reason),
                                 assignor_metadata=metadata, connectors_and_tasks=units)


def install_response(*, error_code: int, error_message: str | None = None) -> ConnectInstallAssignmentResponse:
    return ConnectInstallAssignmentResponse(throttle_time=_ZERO, error_code=i16(error_code),
                                            error_message=error_message)


def described_group(*, error_code: int, group_id: str, error_message: str | None = None, group_state: str = "",
                    group_epoch: int = 0, assignment_epoch: int = 0, assignor_name: str = "",
                    members: tuple[ConnectDescribedMember, ...] = ()) -> ConnectDescribedGroup:
    return ConnectDescribedGroup(error_code=i16(error_code), error_message=error_message, group_id=group_id,
                                 group_state=group_state, group_epoch=i32(group_epoch),
                                 assignment_epoch=i32(assignment_epoch), assignor_name=assignor_name, members=members)


def described_member(*, member_id: str, instance_id: str | None, client_id: str, client_host: str,
                     member_epoch: int, state: str, assignment: ConnectorsAndTasks,
                     target_assignment: ConnectorsAndTasks, metadata_version: int,
                     metadata: bytes) -> ConnectDescribedMember:
    return ConnectDescribedMember(member_id=member_id, instance_id=instance_id, client_id=client_id,
                                  client_host=client_host, member_epoch=i32(member_epoch), state=state,
                                  assignment=assignment, target_assignment=target_assignment,
                                  metadata_version=i16(metadata_version), metadata=metadata)


def describe_response(groups: tuple[ConnectDescribedGroup, ...]) -> ConnectGroupDescribeResponse:
    return ConnectGroupDescribeResponse(throttle_time=_ZERO, groups=groups)
