"""The group coordinator shard: the sans-IO core of one state-topic partition.

A request and the current time go in; records, a response and timer changes come
out as a `Result`. Handlers only read state. `apply(result)` replays the result's
records, and `replay()` is the only way state changes, so loading, writing and
tests share one path (Kafka: `GroupCoordinatorShard` + `GroupMetadataManager`).

Rules:
- the shard dispatches through its registry (group_types.Registry), never by naming a group
  type: record key type -> replay rule, timer kind -> handler, (operation, group class) ->
  handler, and each type's hooks for a loaded shard and a metadata change;
- an operation is a method of the shard named as the API rows' `shard_operation`
  (`shard.offset_commit(ctx, req, now_ms)`), made once per registry here (`_shard_class`):
  the request's one shape is built first, if the operation's contribution gives one
  (classic/requests.py, offsets/requests.py, modern/consumer/requests.py for the consumer
  heartbeat, admin_requests.py for the APIs every type answers: wire versions stop here;
  each shape carries what its version means, its answer's classes included), then an operation
  with one row calls its handler, one with rows per group type picks the row by the class
  of the group the request names;
- without a registry of its own a shard takes the built-in one (builtin.py, built once).
"""
from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from types import FunctionType
from typing import TYPE_CHECKING, Any

from records import CoordinatorRecord, UnknownRecord

from ..config import CoordinatorConfig
from . import timers as timer_keys
from .assignors import ASSIGNORS
from .builtin import builtin_registry
from .context import RequestContext, ShardView  # noqa: F401 (the service imports RequestContext from here)
from .group_types import Registry
from .image import EMPTY_IMAGE, MetadataImage, changed_topic_names
from .offset_store import OffsetStore
from .operations import Handler, Rows, handler_for
from .replay import Replayer
from .result import Result, ScheduleTimer, TimerOp

log = logging.getLogger("kcoord.shard")


def _operation(operation: str, rows: Rows, shape: Any) -> Callable[..., Result]:
    """The method serving `operation`: its one row's handler itself where there is nothing to
    do first (a plain function binds as a method: no frame in between), else a function that
    builds the request's shape and, with rows per group type, picks the row by the class of
    the group the request names."""
    if rows.keys() == {None}:
        handler = rows[None]
        if shape is None and isinstance(handler, FunctionType):
            return handler

        def one_row(shard: GroupCoordinatorShard, ctx: RequestContext, req, now_ms: int) -> Result:
            return handler(shard, ctx, req if shape is None else shape(req), now_ms)
        serve = one_row
    else:
        def by_group(shard: GroupCoordinatorShard, ctx: RequestContext, req, now_ms: int) -> Result:
            if shape is not None:
                req = shape(req)
            handler = rows.get(shard.groups.get(req.group_id).__class__)
            if handler is None:
                handler = handler_for(rows, operation, None)
            return handler(shard, ctx, req, now_ms)
        serve = by_group
    serve.__name__ = serve.__qualname__ = operation
    return serve


# registry id -> (the registry, the shard class serving its operations); a registry is built
# once per process (builtin.py), so this holds one entry outside tests.
_CLASSES: dict[int, tuple[Registry, type]] = {}


def _shard_class(registry: Registry) -> type:
    """A subclass of GroupCoordinatorShard with one method per operation of `registry`.
    Methods, not instance attributes: CPython shares an instance dict's keys among the
    instances of a class only up to 30 keys, and the shard's own attributes, read on every
    request, are looked up much faster while it does (callgrind: about 3 % of a durable
    OffsetCommit when the operations were kept on the instance)."""
    known = _CLASSES.get(id(registry))
    if known is not None and known[0] is registry:
        return known[1]
    methods = {}
    for operation, rows in registry.operations.items():
        if hasattr(GroupCoordinatorShard, operation):
            raise ValueError(f"operation {operation!r} would hide the shard's own attribute")
        methods[operation] = _operation(operation, rows, registry.request_shapes.get(operation))
    cls = type("GroupCoordinatorShard", (GroupCoordinatorShard,), {"__module__": __name__, **methods})
    _CLASSES[id(registry)] = (registry, cls)
    return cls


class GroupCoordinatorShard:
    """The `context.ShardView` its handlers see, plus dispatch, replay and lifecycle."""

    def __new__(cls, partition: int, config: CoordinatorConfig | None = None, image: MetadataImage = EMPTY_IMAGE,
                assignors=None, registry: Registry | None = None) -> GroupCoordinatorShard:
        if cls is GroupCoordinatorShard:
            cls = _shard_class(registry or builtin_registry())
        return object.__new__(cls)

    def __init__(self, partition: int, config: CoordinatorConfig | None = None,
                 image: MetadataImage = EMPTY_IMAGE, assignors=None, registry: Registry | None = None) -> None:
        self.partition = partition
        self.config = config or CoordinatorConfig()
        self.image = image
        self.assignors = {name: (assignors or ASSIGNORS)[name] for name in self.config.consumer_assignors}
        self.registry = registry = registry or builtin_registry()
        self.groups: dict[str, Any] = {}
        self.offsets = OffsetStore()
        self._replayer = Replayer(self.groups, self.offsets, registry.replay_rules, registry.simple_group_class)
        self._timers = registry.timers
        self.last_image_version_with_new_topics = 0
        # Client-side assignors: each client-mode group's round in flight (soft state, modern/consumer/client_mode.py).
        self.client_assignments: dict[str, Any] = {}
        # The consumer contribution attaches its HeartbeatIntervalPolicy (modern/consumer/heartbeat_policy.py).
        self.heartbeat_policy: Any = None
        self.log = log
        self._tokens = itertools.count(1)
        for contribution in registry.contributions:
            if contribution.attach is not None:
                contribution.attach(self)

    if TYPE_CHECKING:
        # For mypy only: the operations are methods of the shard's class (`_shard_class`). At
        # run time a class with __getattr__ takes every attribute read through a slower slot
        # and loses CPython's specialised attribute reads (callgrind: +2 % of an OffsetCommit).
        def __getattr__(self, name: str) -> Callable[..., Result]: ...

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
        offsets written before it (offset_store.OffsetStore.end_transaction)."""
        self._replayer.replay_end_transaction(producer_id, committed, marker_offset)

    def apply(self, result: Result, base_offset: int = -1) -> None:
        """Replay a result's records as the runtime appends them at `base_offset`..."""
        if result.replay:
            # The replayer's own loop (`Replayer.replay_records`: an offset commit without a
            # call per record, every other record through `replay`); state still changes
            # only through the replayer (docs/measurements/cpu-per-commit.md).
            self._replayer.replay_records(result.records, base_offset)

    # -------------------------------------------------------------- requests
    def handle(self, operation: str, ctx: RequestContext, req, now_ms: int) -> Result:
        """Serve `operation` with the row for the type of the group `req.group_id` names
        (operations.py), with the request as given (no shape is built)."""
        rows = self.registry.operations[operation]
        handler: Handler = handler_for(rows, operation, self.groups.get(req.group_id))
        return handler(self, ctx, req, now_ms)

    # ----------------------------------------------------------------- timers
    def on_timer(self, key: tuple, payload: Any, now_ms: int) -> Result:
        """One lookup in the table of timer kinds (timers.py), as replay looks up record types."""
        return self._timers[key[0]](self, key, payload, now_ms)

    # ------------------------------------------------------------ lifecycle
    def on_loaded(self, now_ms: int) -> list[TimerOp]:
        """Arm what Kafka's `onLoaded` arms, each group type for its own groups (their
        contributions' `on_loaded`): the retention check, members' session timers, ..."""
        timers: list[TimerOp] = []
        for contribution in self.registry.contributions:
            if contribution.on_loaded is not None:
                timers.extend(contribution.on_loaded(self, now_ms))
        return timers

    def on_metadata_update(self, image: MetadataImage, now_ms: int) -> list[TimerOp]:
        """A topic changed upstream: the offsets of deleted topics go, and each group type
        reacts for its groups (the consumer type: metadata refresh, regex re-resolution)."""
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
        for contribution in self.registry.contributions:
            if contribution.on_metadata_update is not None:
                timers.extend(contribution.on_metadata_update(self, changed, now_ms))
        return timers
