"""The group coordinator shard: the sans-IO core of one state-topic partition.

A request and the current time go in; records, a response and timer changes come
out as a `Result`. Handlers only read state. `apply(result)` replays the result's
records, and `replay()` is the only way state changes, so loading, writing and
tests share one path (Kafka: `GroupCoordinatorShard` + `GroupMetadataManager`).
"""
from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any

from records import CoordinatorRecord, UnknownRecord

from ..config import CoordinatorConfig
from . import classic_join, classic_ops, classic_rebalance, consumer_heartbeat, expiration, group_admin, offset_ops
from . import record_helpers as rh
from . import regex as regexes
from . import timers as timer_keys
from .assignors import ASSIGNORS
from .classic_group import ClassicGroup
from .consumer_group import ConsumerGroup, ConsumerGroupMember, MemberState, ResolvedRegularExpression
from .context import RequestContext  # noqa: F401 (the service imports it from here)
from .errors import ApiError
from .heartbeat_policy import HeartbeatIntervalPolicy
from .image import EMPTY_IMAGE, MetadataImage, changed_topic_names
from .membership import (
    compute_target_assignment,
    fence_members,
    metadata_hash,
    rebalance_timer,
    session_timer,
    subscribed_topic_names,
)
from .migration.hooks import Migration
from .offsets import OffsetStore
from .replay import Replayer
from .result import Result, ScheduleTimer, TimerOp
from .timers import TimerKind

log = logging.getLogger("kcoord.shard")


class GroupCoordinatorShard:
    """The `context.ShardView` its handlers see, plus dispatch, replay and lifecycle."""

    def __init__(self, partition: int, config: CoordinatorConfig | None = None,
                 image: MetadataImage = EMPTY_IMAGE, assignors=None) -> None:
        self.partition = partition
        self.config = config or CoordinatorConfig()
        self.image = image
        self.assignors = {name: (assignors or ASSIGNORS)[name] for name in self.config.consumer_assignors}
        self.groups: dict[str, ConsumerGroup | ClassicGroup] = {}
        self.offsets = OffsetStore()
        self._replayer = Replayer(self.groups, self.offsets)
        self.migration = Migration(self.config)
        self.heartbeat_policy = HeartbeatIntervalPolicy(self.config)
        self.last_image_version_with_new_topics = 0
        self.log = log
        self._tokens = itertools.count(1)

    def next_token(self) -> int:
        """A token for a parked request (the runtime maps it to the client's response)."""
        return next(self._tokens)

    # ---------------------------------------------------------------- replay
    @property
    def unknown_record_types(self):
        return self._replayer.unknown_record_types

    def replay(self, record: CoordinatorRecord | UnknownRecord, offset: int = -1,
               producer_id: int = -1) -> None:
        self._replayer.replay(record, offset, producer_id)

    def replay_offset_commit(self, key, fields: tuple | None, offset: int, producer_id: int = -1) -> None:
        """Offset commits given as decoded fields (the bulk loader's entry into replay)."""
        self._replayer.replay_offset_commit(key, fields, offset, producer_id)

    def replay_end_transaction(self, producer_id: int, committed: bool) -> None:
        self._replayer.replay_end_transaction(producer_id, committed)

    def apply(self, result: Result, base_offset: int = -1) -> None:
        """Replay a result's records as the runtime appends them at `base_offset`..."""
        if not result.replay:
            return
        for i, record in enumerate(result.records):
            self.replay(record, base_offset + i if base_offset >= 0 else -1)

    # -------------------------------------------------------------- requests
    def consumer_group_heartbeat(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return consumer_heartbeat.heartbeat(self, ctx, req, now_ms)

    def consumer_group_describe(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return group_admin.consumer_group_describe(self, ctx, req)

    def describe_groups(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return group_admin.describe_groups(self, ctx, req)

    def list_groups(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return group_admin.list_groups(self, ctx, req)

    def delete_groups(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return group_admin.delete_groups(self, ctx, req, now_ms)

    def join_group(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return classic_join.join_group(self, ctx, req, now_ms)

    def sync_group(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return classic_ops.sync_group(self, ctx, req, now_ms)

    def heartbeat(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return classic_ops.heartbeat(self, ctx, req, now_ms)

    def leave_group(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return classic_ops.leave_group(self, ctx, req, now_ms)

    def offset_commit(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return offset_ops.offset_commit(self, ctx, req, now_ms)

    def offset_fetch(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return offset_ops.offset_fetch(self, ctx, req, now_ms)

    def offset_delete(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return offset_ops.offset_delete(self, ctx, req, now_ms)

    # ------------------------------------------------------- shared decisions
    def session_timeout_ms(self, group: ConsumerGroup, member: ConsumerGroupMember) -> int:
        if member.classic_member_metadata is not None:
            return member.classic_member_metadata.session_timeout_ms
        return self.config.consumer_session_timeout_ms

    def heartbeat_interval_ms(self, group: ConsumerGroup, member: ConsumerGroupMember,
                              target_behind: bool = False) -> int:
        return self.heartbeat_policy.interval_ms(self, group, member, target_behind)

    def can_compute_assignment(self, group: ConsumerGroup, now_ms: int) -> bool:
        """KIP-1263 `canComputeNextTargetAssignment`."""
        interval = self.config.consumer_assignment_interval_ms
        ts = group.assignment_timestamp_ms
        return ts == 0 or interval == 0 or now_ms >= ts + interval

    def assignment_timer(self, group: ConsumerGroup) -> ScheduleTimer:
        return ScheduleTimer(timer_keys.assignment_key(group.group_id),
                             group.assignment_timestamp_ms + self.config.consumer_assignment_interval_ms)

    def fence(self, group: ConsumerGroup, member_ids: list[str], now_ms: int) -> Result:
        downgraded = self.migration.downgrade_on_fence(self, group, member_ids, now_ms)
        if downgraded is not None:
            return downgraded
        records, timers = fence_members(self, group, member_ids)
        return Result(records=records, timers=timers)

    def maybe_schedule_regex_refresh(self, group: ConsumerGroup, now_ms: int,
                                     new_regex: str | None = None) -> ScheduleTimer | None:
        """Kafka refreshes a group's regexes when one is unresolved, when topics were created
        since the last resolution, or every `regex.refresh.interval.ms`; never more than once
        per 10 s. Resolution runs as its own operation (a timer) like Kafka's background task."""
        if not group.regex_subscribers and new_regex is None:
            return None
        resolved = group.resolved_regexes
        last_refresh = max((r.timestamp_ms for r in resolved.values()), default=0)
        unresolved = new_regex is not None or any(r not in resolved for r in group.regex_subscribers)
        stale_version = min((r.version for r in resolved.values()), default=0)
        new_topics = stale_version < self.last_image_version_with_new_topics
        periodic = now_ms > last_refresh + self.config.consumer_regex_refresh_interval_ms
        if not (unresolved or new_topics or periodic):
            return None
        deadline = max(now_ms, last_refresh + self.config.consumer_regex_batch_refresh_min_interval_ms)
        return ScheduleTimer(timer_keys.regex_refresh_key(group.group_id), deadline)

    # ----------------------------------------------------------------- timers
    def on_timer(self, key: tuple, payload: Any, now_ms: int) -> Result:
        """One lookup in the table of timer kinds (timers.py), as replay looks up record types."""
        return _TIMER_HANDLERS[key[0]](self, key, payload, now_ms)

    def _on_expire(self, key: tuple, payload: Any, now_ms: int) -> Result:
        return expiration.cleanup(self, now_ms)

    def _on_topics_deleted(self, key: tuple, payload: Any, now_ms: int) -> Result:
        return expiration.topics_deleted(self, payload)

    def _on_classic_join(self, key: tuple, payload: Any, now_ms: int) -> Result:
        group = self.groups.get(key[1])
        if not isinstance(group, ClassicGroup):
            return Result()
        return classic_rebalance.on_join_timer(self, group, payload, now_ms)

    def _on_classic_sync(self, key: tuple, payload: Any, now_ms: int) -> Result:
        group = self.groups.get(key[1])
        if not isinstance(group, ClassicGroup):
            return Result()
        return classic_rebalance.on_sync_timer(self, group, payload, now_ms)

    def _on_classic_heartbeat(self, key: tuple, payload: Any, now_ms: int) -> Result:
        group = self.groups.get(key[1])
        if not isinstance(group, ClassicGroup):
            return Result()
        return classic_rebalance.on_heartbeat_timer(self, group, key[2], now_ms)

    def _on_session_timeout(self, key: tuple, payload: Any, now_ms: int) -> Result:
        group, member_id = self.groups.get(key[1]), key[2]
        if not isinstance(group, ConsumerGroup) or member_id not in group.members:
            return Result()
        log.info("[GroupId %s] Member %s fenced from the group because its session expired.",
                 group.group_id, member_id)
        return self.fence(group, [member_id], now_ms)

    def _on_classic_member_timeout(self, key: tuple, payload: Any, now_ms: int) -> Result:
        """A classic member of a consumer group that did not rejoin / sync in time."""
        group, member_id = self.groups.get(key[1]), key[2]
        if not isinstance(group, ConsumerGroup) or member_id not in group.members:
            return Result()
        return self.fence(group, [member_id], now_ms)

    def _on_rebalance_timeout(self, key: tuple, payload: Any, now_ms: int) -> Result:
        group = self.groups.get(key[1])
        if not isinstance(group, ConsumerGroup):
            return Result()
        member = group.members.get(key[2])
        if member is None or member.member_epoch != payload:
            return Result()
        log.info("[GroupId %s] Member %s fenced from the group because it failed to transition "
                 "from epoch %d within %dms.", group.group_id, member.member_id, payload,
                 member.rebalance_timeout_ms)
        return self.fence(group, [member.member_id], now_ms)

    def _on_assignment(self, key: tuple, payload: Any, now_ms: int) -> Result:
        group = self.groups.get(key[1])
        if not isinstance(group, ConsumerGroup) or not group.members or group.assignment_epoch >= group.group_epoch:
            return Result()
        try:
            records, _ = compute_target_assignment(self, group, group.group_epoch, None, now_ms)
        except ApiError as e:
            log.error("[GroupId %s] %s", group.group_id, e.message)
            return Result()
        return Result(records=records)

    def _on_regex_refresh(self, key: tuple, payload: Any, now_ms: int) -> Result:
        group = self.groups.get(key[1])
        if not isinstance(group, ConsumerGroup):
            return Result()
        return self._refresh_regexes(group, now_ms)

    def _refresh_regexes(self, group: ConsumerGroup, now_ms: int) -> Result:
        """`handleRegularExpressionsResult`: one record per still-subscribed regex, and a new
        group epoch when a resolution or the metadata hash changed."""
        gid = group.group_id
        records: list = []
        changed = False
        new_resolved = dict(group.resolved_regexes)
        topic_names = list(self.image.topics_by_name)
        excluded = regexes.excluded_topics(self.config)  # never the state topic
        for regex in group.regex_subscribers:
            try:
                topics = regexes.resolve(regex, topic_names, excluded)
            except ApiError:
                continue
            resolved = ResolvedRegularExpression(topics, self.image.version, now_ms)
            # Kafka compares with `ResolvedRegularExpression.EMPTY` when the regex had no
            # resolution yet: a first resolution that matches nothing is no change.
            changed |= regexes.resolution_changed(group.resolved_regexes.get(regex), topics)
            new_resolved[regex] = resolved
            records.append(rh.regex_record(gid, regex, resolved))
        names = set(group.subscribed_topic_names)
        for regex in group.regex_subscribers:
            if regex in new_resolved:
                names |= new_resolved[regex].topics
        new_hash = metadata_hash(self.image, names)
        timers: list[TimerOp] = []
        if changed or new_hash != group.metadata_hash:
            records.append(rh.group_epoch_record(gid, group.group_epoch + 1, new_hash))
            timers.append(ScheduleTimer(timer_keys.assignment_key(gid), now_ms))
        return Result(records=records, timers=timers)

    # ------------------------------------------------------------ lifecycle
    def on_loaded(self, now_ms: int) -> list[TimerOp]:
        """Arm what Kafka's `onLoaded` arms: session timers for every member, rebalance
        timers for members still revoking, plus pending target computations."""
        timers: list[TimerOp] = [ScheduleTimer(timer_keys.EXPIRE_KEY,
                                               now_ms + self.config.offsets_retention_check_interval_ms)]
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                # A loaded classic group is STABLE with its members: they must keep heartbeating.
                for m in group.members.values():
                    timers.append(ScheduleTimer(timer_keys.heartbeat_key(group.group_id, m.member_id),
                                                now_ms + m.session_timeout_ms))
                continue
            if not isinstance(group, ConsumerGroup):
                continue
            group.metadata_refresh_requested = True
            for member in group.members.values():
                timers.append(ScheduleTimer(session_timer(group.group_id, member.member_id),
                                            now_ms + self.session_timeout_ms(group, member)))
                if member.state is MemberState.UNREVOKED_PARTITIONS and not member.uses_classic_protocol:
                    timers.append(ScheduleTimer(rebalance_timer(group.group_id, member.member_id),
                                                now_ms + member.rebalance_timeout_ms, member.member_epoch))
            if group.members and group.assignment_epoch < group.group_epoch:
                timers.append(self.assignment_timer(group))
        return timers

    def on_metadata_update(self, image: MetadataImage, now_ms: int) -> list[TimerOp]:
        """A topic changed upstream: groups subscribed to it recompute their metadata hash on
        the next heartbeat (Kafka: `requestMetadataRefresh`); regex groups re-resolve."""
        old, self.image = self.image, image
        changed = changed_topic_names(old, image)
        if not changed:
            return []
        if image.topics_by_name.keys() - old.topics_by_name.keys():
            self.last_image_version_with_new_topics = image.version
        timers: list[TimerOp] = []
        deleted = old.topics_by_name.keys() - image.topics_by_name.keys()
        if deleted and old.topics_by_name:
            # Only topics seen and then gone count as deleted, never ones merely unknown.
            timers.append(ScheduleTimer(timer_keys.topics_deleted_key(image.version), now_ms,
                                        frozenset(deleted)))
        for group in self.groups.values():
            if not isinstance(group, ConsumerGroup) or not group.members:
                continue
            names = subscribed_topic_names(group, group.subscribed_topic_names, group.regex_subscribers)
            if names & changed:
                group.metadata_refresh_requested = True
            timer = self.maybe_schedule_regex_refresh(group, now_ms)
            if timer is not None:
                timers.append(timer)
        return timers


# One handler per timer kind (timers.py); a kind without one fails at import, not at expiry.
_TIMER_HANDLERS: dict[str, Callable[[GroupCoordinatorShard, tuple, Any, int], Result]] = {
    TimerKind.EXPIRE.value: GroupCoordinatorShard._on_expire,
    TimerKind.TOPICS_DELETED.value: GroupCoordinatorShard._on_topics_deleted,
    TimerKind.CLASSIC_JOIN.value: GroupCoordinatorShard._on_classic_join,
    TimerKind.CLASSIC_SYNC.value: GroupCoordinatorShard._on_classic_sync,
    TimerKind.CLASSIC_HEARTBEAT.value: GroupCoordinatorShard._on_classic_heartbeat,
    TimerKind.SESSION.value: GroupCoordinatorShard._on_session_timeout,
    TimerKind.JOIN.value: GroupCoordinatorShard._on_classic_member_timeout,
    TimerKind.SYNC.value: GroupCoordinatorShard._on_classic_member_timeout,
    TimerKind.REBALANCE.value: GroupCoordinatorShard._on_rebalance_timeout,
    TimerKind.ASSIGNMENT.value: GroupCoordinatorShard._on_assignment,
    TimerKind.REGEX_REFRESH.value: GroupCoordinatorShard._on_regex_refresh,
}
_missing = {k.value for k in TimerKind} - _TIMER_HANDLERS.keys()
if _missing:
    raise ImportError(f"timer kinds without a handler: {sorted(_missing)}")
