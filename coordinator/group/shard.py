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
from . import group_admin
from . import timers as timer_keys
from .assignors import ASSIGNORS
from .classic import join as classic_join
from .classic import ops as classic_ops
from .classic import rebalance as classic_rebalance
from .classic import requests as classic_requests
from .classic.group import ClassicGroup
from .context import RequestContext, ShardView  # noqa: F401 (the service imports RequestContext from here)
from .errors import ApiError
from .image import EMPTY_IMAGE, MetadataImage, changed_topic_names
from .migration import rows as migration_rows
from .migration.conversion import fence_or_downgrade
from .modern.client_assignment import ClientAssignment
from .modern.connect import admin as connect_admin
from .modern.connect import assignment as connect_assignment
from .modern.connect import heartbeat as connect_heartbeat
from .modern.connect import replay as connect_replay  # noqa: F401 (registers the replay rules of record types 1000-1004)
from .modern.consumer import client_mode, regex_refresh
from .modern.consumer.assignment_pacing import assignment_timer
from .modern.consumer.group import ConsumerGroup, MemberState
from .modern.consumer.heartbeat_policy import HeartbeatIntervalPolicy, session_timeout_ms
from .modern.consumer.membership import (
    compute_target_assignment,
    rebalance_timer,
    session_timer,
    subscribed_topic_names,
)
from .offsets import expiration
from .offsets import ops as offset_ops
from .offsets.store import OffsetStore
from .operations import handler_for, register_operation, rows_of
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
        # The service replaces the count with its process-wide one.
        self.heartbeat_policy = HeartbeatIntervalPolicy(
            self.config, lambda: sum(len(g.members) for g in self.groups.values()))
        self.last_image_version_with_new_topics = 0
        # Client-side assignors: each client-mode group's round in flight (soft state, modern/consumer/client_mode.py).
        self.client_assignments: dict[str, ClientAssignment] = {}
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

    def replay_end_transaction(self, producer_id: int, committed: bool, marker_offset: int | None = None) -> None:
        """A COMMIT/ABORT marker of a client's transaction; at `marker_offset`, it ends only the
        offsets written before it (offsets.OffsetStore.end_transaction)."""
        self._replayer.replay_end_transaction(producer_id, committed, marker_offset)

    def apply(self, result: Result, base_offset: int = -1) -> None:
        """Replay a result's records as the runtime appends them at `base_offset`..."""
        if not result.replay:
            return
        for i, record in enumerate(result.records):
            self.replay(record, base_offset + i if base_offset >= 0 else -1)

    # -------------------------------------------------------------- requests
    def handle(self, operation: str, ctx: RequestContext, req, now_ms: int) -> Result:
        """Serve `operation` with the row for the type of the group `req.group_id` names
        (operations.py): the one door for an API whose handler depends on the group's type."""
        return handler_for(operation, self.groups.get(req.group_id))(self, ctx, req, now_ms)

    def consumer_group_heartbeat(self, ctx: RequestContext, req, now_ms: int) -> Result:
        # handle(), inlined: the steady heartbeat is the hottest request (callgrind).
        group = self.groups.get(req.group_id)
        handler = _HEARTBEAT_ROWS.get(group.__class__) or _HEARTBEAT_ROWS[None]
        return handler(self, ctx, req, now_ms)

    def consumer_group_csa_heartbeat(self, ctx: RequestContext, req, now_ms: int) -> Result:
        """32700, ConsumerGroupHeartbeat with ClientAssignors (docs/design/client-assignors-spec.md);
        answers a CsaAnswer."""
        return self.handle("consumer_group_csa_heartbeat", ctx, req, now_ms)

    def consumer_group_prepare_assignment(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return client_mode.prepare_assignment(self, req, now_ms)

    def consumer_group_install_assignment(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return client_mode.install_assignment(self, req, now_ms)

    # The connect group type (coordinator/group/modern/connect/; docs/design/connect-groups.md).
    def connect_group_heartbeat(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return connect_heartbeat.heartbeat(self, ctx, req, now_ms)

    def connect_group_prepare_assignment(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return connect_assignment.prepare(self, ctx, req, now_ms)

    def connect_group_install_assignment(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return connect_assignment.install(self, ctx, req, now_ms)

    def connect_group_describe(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return connect_admin.describe(self, ctx, req, now_ms)

    def consumer_group_describe(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return group_admin.consumer_group_describe(self, ctx, req)

    def describe_groups(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return group_admin.describe_groups(self, ctx, req)

    def list_groups(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return group_admin.list_groups(self, ctx, req)

    def delete_groups(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return group_admin.delete_groups(self, ctx, req, now_ms)

    def join_group(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return self.handle("join_group", ctx, classic_requests.JoinGroup.of(req), now_ms)

    def sync_group(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return self.handle("sync_group", ctx, classic_requests.SyncGroup.of(req), now_ms)

    def heartbeat(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return self.handle("heartbeat", ctx, req, now_ms)

    def leave_group(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return self.handle("leave_group", ctx, req, now_ms)

    def offset_commit(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return offset_ops.offset_commit(self, ctx, req, now_ms)

    def offset_fetch(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return offset_ops.offset_fetch(self, ctx, req, now_ms)

    def offset_delete(self, ctx: RequestContext, req, now_ms: int) -> Result:
        return offset_ops.offset_delete(self, ctx, req, now_ms)

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
        return fence_or_downgrade(self, group, [member_id], now_ms)

    def _on_classic_member_timeout(self, key: tuple, payload: Any, now_ms: int) -> Result:
        """A classic member of a consumer group that did not rejoin / sync in time."""
        group, member_id = self.groups.get(key[1]), key[2]
        if not isinstance(group, ConsumerGroup) or member_id not in group.members:
            return Result()
        return fence_or_downgrade(self, group, [member_id], now_ms)

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
        return fence_or_downgrade(self, group, [member.member_id], now_ms)

    def _on_assignment(self, key: tuple, payload: Any, now_ms: int) -> Result:
        group = self.groups.get(key[1])
        if not isinstance(group, ConsumerGroup) or not group.members or group.assignment_epoch >= group.group_epoch:
            return Result()
        asked = client_mode.on_assignment_timer(self, group, now_ms)
        if asked is not None:
            return asked   # client mode: a member computes it (docs/design/client-assignors-spec.md)
        try:
            records, _ = compute_target_assignment(self, group, group.group_epoch, None, now_ms)
        except ApiError as e:
            log.error("[GroupId %s] %s", group.group_id, e.message)
            return Result()
        return Result(records=records)

    def _on_client_assignment(self, key: tuple, payload: Any, now_ms: int) -> Result:
        group = self.groups.get(key[1])
        if not isinstance(group, ConsumerGroup):
            self.client_assignments.pop(key[1], None)
            return Result()
        return client_mode.on_deadline(self, group, now_ms)

    def _on_connect(self, key: tuple, payload: Any, now_ms: int) -> Result:
        return connect_heartbeat.on_timer(self, key, payload, now_ms)

    def _on_regex_refresh(self, key: tuple, payload: Any, now_ms: int) -> Result:
        group = self.groups.get(key[1])
        if not isinstance(group, ConsumerGroup):
            return Result()
        return regex_refresh.refresh(self, group, now_ms)

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
                                            now_ms + session_timeout_ms(self.config, member)))
                if member.state is MemberState.UNREVOKED_PARTITIONS and not member.uses_classic_protocol:
                    timers.append(ScheduleTimer(rebalance_timer(group.group_id, member.member_id),
                                                now_ms + member.rebalance_timeout_ms, member.member_epoch))
            if group.members and group.assignment_epoch < group.group_epoch:
                timers.append(assignment_timer(self.config, group))
        timers.extend(connect_heartbeat.on_loaded(self, now_ms))
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
            timer = regex_refresh.refresh_timer(self.config, group, now_ms, self.last_image_version_with_new_topics)
            if timer is not None:
                timers.append(timer)
        return timers


# One handler per timer kind (timers.py); a kind without one fails at import, not at expiry.
_TIMER_HANDLERS: dict[str, Callable[[Any, tuple, Any, int], Result]] = {
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
    TimerKind.CONNECT.value: GroupCoordinatorShard._on_connect,
    TimerKind.CLIENT_ASSIGNMENT.value: GroupCoordinatorShard._on_client_assignment,
}
_missing = {k.value for k in TimerKind} - _TIMER_HANDLERS.keys()
if _missing:
    raise ImportError(f"timer kinds without a handler: {sorted(_missing)}")


def register_timer(kind: str, handler: Callable[[ShardView, tuple, Any, int], Result]) -> None:
    """A new group type's timer kind: `handler(shard, key, payload, now_ms)` serves the keys
    `(kind, ...)` its handlers schedule. A kind has one handler."""
    if kind in _TIMER_HANDLERS:
        raise ValueError(f"timer kind {kind!r} already has a handler")
    _TIMER_HANDLERS[kind] = handler


# The rows of the APIs whose handler depends on the group's type (operations.py). Classic
# APIs on a consumer group, and every consumer group heartbeat, go through migration/, which
# sits above classic/ and modern/consumer/ (migration/rows.py says why).
for _op, _default, _on_consumer_group in (
        ("join_group", classic_join.join_group, migration_rows.join_group),
        ("sync_group", classic_ops.sync_group, migration_rows.sync_group),
        ("heartbeat", classic_ops.heartbeat, migration_rows.heartbeat),
        ("leave_group", classic_ops.leave_group, migration_rows.leave_group)):
    register_operation(_op, _default)
    register_operation(_op, _on_consumer_group, ConsumerGroup)
register_operation("consumer_group_heartbeat", migration_rows.consumer_group_heartbeat)
_HEARTBEAT_ROWS = rows_of("consumer_group_heartbeat")
register_operation("consumer_group_csa_heartbeat", migration_rows.consumer_group_csa_heartbeat)
