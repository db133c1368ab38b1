"""Online conversion between classic and consumer groups (KIP-848 migration,
docs/design/kafka-facts.md §5.2-§5.3), writing exactly Kafka's record sequences:

- upgrade: GroupMetadata tombstone, then per member ConsumerGroupMemberMetadata,
  ConsumerGroupMetadata(generation, hash), per member TargetAssignmentMember,
  TargetAssignmentMetadata(generation), per member CurrentMemberAssignment;
- downgrade: the consumer group's tombstones (`createGroupTombstoneRecords`), then a
  GroupMetadata record of a STABLE classic group whose members keep their target
  assignments, serialized with the ConsumerProtocol version each member speaks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from records import ClassicMemberMetadata, ClassicProtocol

from ...protocol.consumer_protocol import (
    MalformedProtocolData,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from .. import record_helpers as rh
from ..classic.group import ClassicGroup, ClassicGroupMember, ClassicGroupState
from ..classic.rebalance import (
    Effects,
    complete_join,
    complete_sync,
    heartbeat_key,
    join_key,
    prepare_rebalance,
    reschedule_heartbeat,
    sync_key,
)
from ..errors import ApiError
from ..group_types import group_type
from ..modern.consumer.group import ConsumerGroup, ConsumerGroupMember, MemberState
from ..modern.consumer.membership import cancel_member_timers, fence, metadata_hash, session_timer
from ..modern.consumer.replay import REPLAY_RULES as CONSUMER_REPLAY_RULES
from ..offset_store import OffsetStore
from ..replay import Replayer
from ..result import CancelTimer, Result, ScheduleTimer
from .policy import MigrationPolicy

if TYPE_CHECKING:
    from ..context import ShardView


# -------------------------------------------------------------------- upgrade
def upgrade(shard: ShardView, classic: ClassicGroup, out: Effects, now_ms: int) -> ConsumerGroup:
    """Convert a non-empty classic `consumer` group for the first ConsumerGroupHeartbeat
    that joins it. Returns the consumer group the heartbeat continues with; the records
    added to `out` make it real when replayed."""
    records, timers = out.records, out.timers
    gid = classic.group_id
    policy = MigrationPolicy.parse(shard.config.consumer_migration_policy)
    if not policy.upgrade_enabled:
        raise ApiError(ErrorCode.group_id_not_found, f"Cannot upgrade classic group {gid} to a consumer group "
                                                     f"because the online upgrade is disabled.")
    if classic.protocol_type != "consumer":
        raise ApiError(ErrorCode.group_id_not_found, f"Cannot upgrade classic group {gid} to a consumer group "
                                                     f"because its protocol type is {classic.protocol_type!r}.")
    if len(classic.members) > shard.config.consumer_max_size:
        raise ApiError(ErrorCode.group_id_not_found, f"Cannot upgrade classic group {gid} to a consumer group "
                                                     f"because it has more members than group.consumer.max.size.")
    generation = classic.generation_id
    members = [_consumer_member(shard, classic, m, generation) for m in classic.members.values()]

    # Parked JoinGroup/SyncGroup requests of the classic group are answered
    # REBALANCE_IN_PROGRESS: those members rejoin, now as members of a consumer group.
    fx = Effects()
    for m in list(classic.members.values()):
        complete_join(fx, classic, m, error=ErrorCode.rebalance_in_progress, member_id=m.member_id)
        complete_sync(fx, m, error=ErrorCode.rebalance_in_progress)
        timers.append(CancelTimer(heartbeat_key(gid, m.member_id)))
    out.completions.extend(fx.completions)
    timers += [CancelTimer(join_key(gid)), CancelTimer(sync_key(gid))]

    conversion = [rh.member_metadata_record(gid, m) for m in members]
    names = {t for m in members for t in m.subscribed_topic_names}
    conversion.append(rh.group_epoch_record(gid, generation, metadata_hash(shard.image, names)))
    conversion += [rh.target_member_record(gid, m.member_id, m.assigned_partitions) for m in members]
    conversion.append(rh.target_metadata_record(gid, generation, 0))
    conversion += [rh.current_assignment_record(gid, m) for m in members]
    records.append(rh.group_metadata_tombstone(gid))
    records.extend(conversion)
    for member in members:
        meta = member.classic_member_metadata
        assert meta is not None   # every member of a converted classic group has its metadata
        timers.append(ScheduleTimer(session_timer(gid, member.member_id), now_ms + meta.session_timeout_ms))
    shard.log.info("[GroupId %s] Converted the classic group to a consumer group (generation %d, %d members).",
                   gid, generation, len(members))
    # The heartbeat continues against the group these records describe.
    scratch: dict = {}
    replayer = Replayer(scratch, OffsetStore(), CONSUMER_REPLAY_RULES, ClassicGroup)
    for record in conversion:
        replayer.replay(record)
    return scratch[gid]


def _consumer_member(shard: ShardView, classic: ClassicGroup, m: ClassicGroupMember,
                     generation: int) -> ConsumerGroupMember:
    gid = classic.group_id
    try:
        subscription = decode_subscription(m.metadata_for(classic.protocol_name))
        assignment = decode_assignment(m.assignment)
    except MalformedProtocolData as e:
        raise ApiError(ErrorCode.group_id_not_found,
                       f"Cannot upgrade classic group {gid}: member {m.member_id} sent malformed protocol "
                       f"data ({e}).") from e
    if assignment.user_data:
        raise ApiError(ErrorCode.group_id_not_found,
                       f"Cannot upgrade classic group {gid} to a consumer group because an unsupported custom "
                       f"assignor is in use (member {m.member_id} has assignment user data).")
    assigned = {}
    for topic, partitions in assignment.partitions.items():
        t = shard.image.topics_by_name.get(topic)
        if t is not None and partitions:
            # KIP-1251: partitions owned at the upgrade count as assigned at the generation.
            assigned[t.topic_id] = dict.fromkeys(partitions, generation)
    return ConsumerGroupMember(
        member_id=m.member_id, member_epoch=generation, previous_member_epoch=generation,
        state=MemberState.STABLE, instance_id=m.group_instance_id, rack_id=subscription.rack_id,
        rebalance_timeout_ms=m.rebalance_timeout_ms, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=tuple(sorted(set(subscription.topics))),
        classic_member_metadata=ClassicMemberMetadata(
            session_timeout_ms=m.session_timeout_ms,
            supported_protocols=tuple(ClassicProtocol(name=n, metadata=meta) for n, meta in m.supported_protocols)),
        assigned_partitions=assigned)


# ------------------------------------------------------------------ downgrade
def can_downgrade_without(shard: ShardView, group: ConsumerGroup, leaving: set[str]) -> bool:
    """`validateOnlineDowngradeWithFencedMembers`: the members left all speak the classic
    protocol, there is at least one, the policy allows it and the classic group would not
    be over group.max.size."""
    remaining = [m for mid, m in group.members.items() if mid not in leaving]
    return (MigrationPolicy.parse(shard.config.consumer_migration_policy).downgrade_enabled and bool(remaining)
            and all(m.uses_classic_protocol for m in remaining)
            and len(remaining) <= shard.config.group_max_size)


def downgrade(shard: ShardView, group: ConsumerGroup, leaving: set[str], now_ms: int,
              *, replaced: tuple[str, ClassicGroupMember] | None = None,
              rebalance: bool = True) -> tuple[ClassicGroup, Effects]:
    """`convertToClassicGroup`. The swap is done in memory at once (Kafka writes these
    records with replayRecords=false); a reload replays them in this order."""
    gid = group.group_id
    fx = Effects()
    tombstone_group: ConsumerGroup | _RenamedMembers = group
    if replaced is not None:
        # Trigger B: the joining classic static member takes the replaced member's place,
        # also in the tombstones (Kafka swaps the ids).
        replaced_id, joining = replaced
        tombstone_group = _RenamedMembers(group, replaced_id, joining.member_id)
    # The consumer type's tombstones, of the renamed view when a static member is replaced.
    fx.records.extend(group_type(group).tombstones(tombstone_group))
    classic = ClassicGroup(gid, ClassicGroupState.STABLE, now_ms)
    classic.protocol_type = "consumer"
    classic.generation_id = group.group_epoch
    assignments: dict[str, bytes] = {}
    for mid, m in group.members.items():
        if mid in leaving:
            continue
        if replaced is not None and mid == replaced[0]:
            cm = replaced[1]
            target = group.target_of(mid)
            version = _subscription_version(cm.supported_protocols)
        else:
            meta = m.classic_member_metadata
            assert meta is not None   # a downgrade keeps only classic-protocol members
            protocols = [(p.name, bytes(p.metadata)) for p in meta.supported_protocols]
            cm = ClassicGroupMember(mid, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                    meta.session_timeout_ms, "consumer", protocols)
            target = group.target_of(mid)
            version = _subscription_version(protocols)
        names = {}
        for topic_id, partitions in target.items():
            t = shard.image.topics_by_id.get(topic_id)
            if t is not None:
                names[t.name] = tuple(partitions)
        cm.assignment = assignments[cm.member_id] = encode_assignment(names, version)
        classic.add(cm)
    classic.leader_id = None  # Kafka converts without a leader; the next rebalance elects one
    classic.protocol_name = classic.select_protocol()
    fx.records.append(rh.group_metadata_record(classic, assignments))
    shard.groups[gid] = classic
    for mid in group.members:
        fx.timers.extend(cancel_member_timers(gid, mid))
    for classic_member in classic.members.values():
        reschedule_heartbeat(shard, fx, classic, classic_member, now_ms)
    shard.log.info("[GroupId %s] Converted the consumer group to a classic group (generation %d, %d members).",
                   gid, classic.generation_id, len(classic.members))
    if rebalance:
        prepare_rebalance(shard, fx, classic, f"Downgrade consumer group {gid} to classic group", now_ms)
    return classic, fx


def fence_or_downgrade(shard: ShardView, group: ConsumerGroup, member_ids: list[str], now_ms: int) -> Result:
    """Kafka's `consumerGroupFenceMembers`: the members leave (a session or rebalance timeout,
    a leave, a static replacement); when they are the last consumer-protocol members and the
    rest use the classic protocol, the policy may convert the group back to classic instead
    (downgrade trigger A)."""
    if not can_downgrade_without(shard, group, set(member_ids)):
        return fence(shard, group, member_ids, now_ms)
    _, fx = downgrade(shard, group, set(member_ids), now_ms)
    return fx.result()


def _subscription_version(protocols: list[tuple[str, bytes]]) -> int:
    for _, meta in protocols:
        try:
            return decode_subscription(meta).version
        except MalformedProtocolData:
            continue
    return 0


class _RenamedMembers:
    """A view of a consumer group whose member `old` is called `new` (for tombstones)."""

    def __init__(self, group: ConsumerGroup, old: str, new: str) -> None:
        self.group_id = group.group_id
        self.members = {(new if mid == old else mid): m for mid, m in group.members.items()}
        self.resolved_regexes = group.resolved_regexes
