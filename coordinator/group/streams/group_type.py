"""What the shared group APIs know of a streams group (group_types.GroupType; Kafka: the `Group`
methods of `StreamsGroup`).

Rules:
- offsets are committed per partition of a source or repartition-source topic; the task that
  reads it is (the subtopology reading the topic, the partition), and KIP-1251's relaxed epoch
  rule applies per task: an older member epoch is accepted for a task given at or before it,
  assigned or pending revocation (Kafka 4.4 stamps active tasks with assignment epochs);
- OffsetCommit below v9 is refused to a streams member (UNSUPPORTED_VERSION), and OffsetFetch
  needs the member's exact epoch, as for a consumer-group member;
- the group reads (is subscribed to) its topology's source and repartition source topics
  while it has members, none when EMPTY: OffsetDelete answers GROUP_SUBSCRIBED_TO_TOPIC for
  those while it runs, and their offsets expire only once it is empty;
- DeleteGroups needs the group EMPTY; its tombstones follow Kafka's order (current
  assignments, target assignments, target epoch, members, group epoch, topology).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ..errors import ApiError, unknown_member
from ..group_types import ACCEPT_ALL, BaseTime, PartitionCheck, commit_time, relaxed_epoch_check
from . import records as rh
from .model import StreamsGroup

if TYPE_CHECKING:
    from records import CoordinatorRecord

    from ..image import MetadataImage
    from ..result import TimerOp


def validate_streams_commit(group: StreamsGroup, member_id: str, epoch: int, api_version: int,
                            transactional: bool = False, instance_id: str | None = None) -> PartitionCheck:
    """Kafka 4.4's `StreamsGroup.validateOffsetCommit`, in its order: an epoch < 0 to an empty
    group and a TxnOffsetCommit naming no member at all (epoch -1, member "", no instance: the
    API does not require them) pass; then the member must exist; a plain OffsetCommit must be
    v9+ (a TxnOffsetCommit of an exactly-once v2 member may be any version); its exact epoch
    passes, a newer one is stale, and an older one is checked per task against the epoch the
    task was given at, assigned or pending revocation (KIP-1251)."""
    if epoch < 0 and not group.members:
        return ACCEPT_ALL
    if transactional and epoch == -1 and member_id == "" and instance_id is None:
        return ACCEPT_ALL
    member = group.members.get(member_id)
    if member is None:
        raise unknown_member(group.group_id, member_id)
    if not transactional and api_version < 9:
        raise ApiError(ErrorCode.unsupported_version,
                       "OffsetCommit version 9 or above must be used by members using the streams group protocol")
    readers = group.topology.readers() if group.topology is not None else {}

    def given_at(topic_id, topic: str, partition: int) -> int | None:
        sub = readers.get(topic)
        return None if sub is None else member.active_epochs.get((sub, partition))
    return relaxed_epoch_check(epoch, member.member_epoch, given_at)


class StreamsGroupType:
    name = "streams"

    def state(self, group: StreamsGroup) -> str:
        return group.state().value

    def protocol_type(self, group: StreamsGroup) -> str:
        return "streams"

    def subscribed_topics(self, group: StreamsGroup) -> set[str]:
        # Kafka 4.4's `StreamsGroup.isSubscribedToTopic`: an EMPTY group reads no topic, so
        # OffsetDelete (kafka-streams-groups --delete-offsets) may remove its input topics'
        # offsets, and they expire by commit time.
        if group.topology is None or group.is_empty():
            return set()
        return set(group.topology.readers())

    def tombstones(self, group: StreamsGroup) -> list[CoordinatorRecord]:
        gid = group.group_id
        records = [rh.current_assignment_tombstone(gid, m) for m in group.members]
        records += [rh.target_member_tombstone(gid, m) for m in group.target]
        records.append(rh.target_metadata_tombstone(gid))
        records += [rh.member_tombstone(gid, m) for m in group.members]
        records.append(rh.group_tombstone(gid))
        records.append(rh.topology_tombstone(gid))
        return records

    def delete_error(self, group: StreamsGroup) -> ErrorCode | None:
        return None if group.is_empty() else ErrorCode.non_empty_group

    def offset_expiration_base(self, group: StreamsGroup) -> BaseTime | None:
        return commit_time

    def metadata_expires(self, group: StreamsGroup) -> bool:
        return group.is_empty()

    def validate_offset_fetch(self, group: StreamsGroup, member_id: str | None, member_epoch: int) -> None:
        if member_id is None and member_epoch < 0:
            return
        member = group.members.get(member_id or "")
        if member is None:
            raise unknown_member(group.group_id, member_id or "")
        if member_epoch != member.member_epoch:
            raise ApiError(ErrorCode.stale_member_epoch, f"The received member epoch {member_epoch} does not "
                                                         f"match the expected member epoch {member.member_epoch}.")

    def offset_delete_error(self, group: StreamsGroup) -> ErrorCode | None:
        return None

    def validate_offset_commit(self, group: StreamsGroup, image: MetadataImage, member_id: str,
                               instance_id: str | None, generation: int, api_version: int,
                               transactional: bool = False) -> PartitionCheck:
        return validate_streams_commit(group, member_id, generation, api_version, transactional, instance_id)

    def offset_commit_timers(self, group: StreamsGroup, member_id: str, now_ms: int) -> list[TimerOp]:
        return []   # the heartbeat alone keeps a streams member's session
