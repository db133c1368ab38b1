"""The group-type registry: what the kernel and the shared group APIs know of each type of group,
and the one explicit path by which a group type's folder plugs into the shard.

Kafka gives every group type the same `Group` interface (type, state, protocol type,
`isSubscribedToTopic`, `createGroupTombstoneRecords`, `offsetExpirationCondition`,
`validateDeleteGroup`, ...), and ListGroups, DescribeGroups, DeleteGroups, offset expiry and
the tools ask it instead of testing the class. Here each type's folder gives a
`Contribution`: its group class and `GroupType`, the replay rules of its record types, its
rows of (operation, group class) -> handler, its timer kinds, and what a loaded shard or a
metadata change arms for it. `build_registry(contributions)` folds them into one `Registry`
(the tables the shard dispatches on); group/builtin.py builds the built-in one, once.

Rules:
- the kernel (this module, context.py, replay.py, operations.py, ...) names no folder: a
  folder imports the kernel, never the reverse (import-linter's `acyclic_siblings`);
- nothing registers at import: a folder only declares its `Contribution`; `build_registry`
  is called where a shard's registry is built (builtin.py; a test with its own types);
- a table has one entry per key (a group class, a record key type, a timer kind, an
  (operation, group class) pair): a second contribution of the same key is an error;
- `group_type(group)` answers from the process-wide table `build_registry` fills (every
  handler and tool asks it, as Kafka's code asks `group.type()`); registering the same
  `GroupType` for the same class again is a no-op, so building a registry twice is safe;
- the `GroupType` methods are pure reads of the group (and, for tombstones, record
  builders): they never change it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from .errors import ApiError
from .operations import Handler, build_operations

if TYPE_CHECKING:
    from records import CoordinatorRecord

    from .image import MetadataImage
    from .offset_store import OffsetAndMetadata
    from .result import Result, TimerOp

# An offset's expiry base time (Kafka's `OffsetExpirationCondition`), or None: not now.
BaseTime = Callable[["OffsetAndMetadata"], int]
# Decides the error of one (topic id or None, topic name, partition) of a commit.
PartitionCheck = Callable[[object, str, int], "ErrorCode | None"]
ACCEPT_ALL: PartitionCheck = lambda topic_id, topic, partition: None  # noqa: E731
# The epoch at which a partition (a task's partition) was given to a member, assigned or pending
# revocation; None when it is not the member's.
AssignmentEpoch = Callable[[object, str, int], "int | None"]


def relaxed_epoch_check(epoch: int, member_epoch: int, assignment_epoch: AssignmentEpoch,
                        stale: ErrorCode = ErrorCode.stale_member_epoch) -> PartitionCheck:
    """KIP-1251's member epoch rule, shared by the consumer and streams types: the exact epoch
    passes, a newer one refuses the whole commit, an older one is checked per partition against
    the epoch the partition was given at (docs/design/kafka-facts.md §4.8)."""
    if epoch == member_epoch:
        return ACCEPT_ALL
    if epoch > member_epoch:
        raise ApiError(stale, f"Received member epoch {epoch} is newer than current member epoch {member_epoch}.")

    def check(topic_id: object, topic: str, partition: int) -> ErrorCode | None:
        given = assignment_epoch(topic_id, topic, partition)
        return stale if given is None or epoch < given else None
    return check


def commit_time(o: OffsetAndMetadata) -> int:
    """The `BaseTime` of a group whose offsets expire counted from their commit."""
    return o.commit_timestamp


class GroupType(Protocol):
    name: str                  # ListGroups' GroupType ("consumer", "classic", ...)

    def state(self, group: Any) -> str: ...

    def protocol_type(self, group: Any) -> str: ...

    def subscribed_topics(self, group: Any) -> set[str]:
        """Kafka's `isSubscribedToTopic` set: OffsetDelete refuses these topics and
        retention never expires their offsets."""
        ...

    def tombstones(self, group: Any) -> list[CoordinatorRecord]:
        """Kafka's `createGroupTombstoneRecords`: every record of the group, deleted."""
        ...

    def delete_error(self, group: Any) -> ErrorCode | None:
        """Why DeleteGroups refuses the group (Kafka's `validateDeleteGroup`), or None."""
        ...

    def offset_expiration_base(self, group: Any) -> BaseTime | None:
        """`offsetExpirationCondition`: the time an offset's retention counts from."""
        ...

    def metadata_expires(self, group: Any) -> bool:
        """Whether the group itself is deleted once its last offset expired."""
        ...

    def validate_offset_fetch(self, group: Any, member_id: str | None, member_epoch: int) -> None:
        """Kafka's `validateOffsetFetch` (OffsetFetch v9+): raises ApiError if refused."""
        ...

    def offset_delete_error(self, group: Any) -> ErrorCode | None:
        """Kafka's `validateOffsetDelete`: why OffsetDelete refuses the group, or None."""
        ...

    def validate_offset_commit(self, group: Any, image: MetadataImage, member_id: str, instance_id: str | None,
                               generation: int, api_version: int, transactional: bool = False) -> PartitionCheck:
        """Kafka's `validateOffsetCommit` (each type's folder has its commit rule): raises
        ApiError for a group-level refusal, else returns the per-partition check.
        `transactional`: a TxnOffsetCommit's (Kafka's `isTransactional`), whose `api_version`
        is TxnOffsetCommit's own."""
        ...

    def offset_commit_timers(self, group: Any, member_id: str, now_ms: int) -> list[TimerOp]:
        """Timers an accepted commit re-arms (a classic member's commit proves it alive)."""
        ...


# handler(replayer, key, value, offset, producer_id): replay.py
ReplayRule = Callable[[Any, Any, Any, int, int], None]
# handler(shard, key, payload, now_ms): timers.py
TimerHandler = Callable[[Any, tuple, Any, int], "Result"]
# hook(shard, now_ms): the timers a freshly loaded shard arms (Kafka's `onLoaded`)
LoadedHook = Callable[[Any, int], "list[TimerOp]"]
# hook(shard, changed topic names, now_ms): the timers a metadata change arms
MetadataHook = Callable[[Any, "frozenset[str] | set[str]", int], "list[TimerOp]"]


@dataclass(frozen=True)
class Contribution:
    """What one folder adds to the shard. Every field is optional: offsets/ has no group
    class, migration/ only rows and timers."""
    name: str
    group_class: type | None = None
    group_type: GroupType | None = None
    replay_rules: Mapping[type, ReplayRule] = field(default_factory=dict)
    # (operation, group class or None for the default row, handler): operations.py
    operations: tuple[tuple[str, type | None, Handler], ...] = ()
    # operation -> the request's one shape, built once at the shard's door (classic/requests.py)
    request_shapes: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    timers: Mapping[str, TimerHandler] = field(default_factory=dict)
    on_loaded: LoadedHook | None = None
    on_metadata_update: MetadataHook | None = None
    # a shard's soft state this type keeps on it (modern/consumer/: the heartbeat policy)
    attach: Callable[[Any], None] | None = None
    # the type of a group that only holds offsets (Kafka's "simple" classic group)
    simple_group: bool = False


@dataclass(frozen=True)
class Registry:
    """The shard's tables, built once from the contributions."""
    contributions: tuple[Contribution, ...]
    group_types: Mapping[type, GroupType]
    replay_rules: Mapping[type, ReplayRule]
    operations: Mapping[str, Mapping[type | None, Handler]]
    request_shapes: Mapping[str, Callable[[Any], Any]]
    timers: Mapping[str, TimerHandler]
    simple_group_class: type


def _merge(kind: str, tables: list[tuple[str, Mapping]]) -> dict:
    out: dict = {}
    for who, table in tables:
        for key, value in table.items():
            if key in out:
                name = key.__name__ if isinstance(key, type) else key
                raise ValueError(f"{kind} {name!r} is contributed twice (again by {who!r})")
            out[key] = value
    return out


def build_registry(contributions: tuple[Contribution, ...]) -> Registry:
    """Fold the contributions into the shard's tables; an entry contributed twice, or not
    exactly one type of "simple" group, is an error here, where the shard is built."""
    by_class = _merge("group class", [(c.name, {c.group_class: c.group_type}) for c in contributions
                                      if c.group_class is not None and c.group_type is not None])
    simple = [c.group_class for c in contributions if c.simple_group]
    if len(simple) != 1 or simple[0] is None:
        raise ValueError(f"exactly one group type must hold offsets-only groups, not {simple}")
    for group_class, gtype in by_class.items():
        register(group_class, gtype)
    return Registry(
        contributions=contributions,
        group_types=by_class,
        replay_rules=_merge("record key", [(c.name, c.replay_rules) for c in contributions]),
        operations=build_operations(c.operations for c in contributions),
        request_shapes=_merge("request shape of", [(c.name, c.request_shapes) for c in contributions]),
        timers=_merge("timer kind", [(c.name, c.timers) for c in contributions]),
        simple_group_class=simple[0])


_BY_CLASS: dict[type, GroupType] = {}


def register(group_class: type, group_type: GroupType) -> None:
    """Enter a type in the process-wide table (build_registry does it for its contributions)."""
    known = _BY_CLASS.get(group_class)
    if known is group_type:
        return
    if known is not None or any(t.name == group_type.name for t in _BY_CLASS.values()):
        raise ValueError(f"group type {group_type.name!r} ({group_class.__name__}) is registered twice")
    _BY_CLASS[group_class] = group_type


def unregister(group_class: type) -> None:
    """Take a type out of the process-wide table (tests that add a type of their own)."""
    _BY_CLASS.pop(group_class, None)


def group_type(group: Any) -> GroupType:
    try:
        return _BY_CLASS[type(group)]
    except KeyError:
        raise TypeError(f"{type(group).__name__} is not a registered group type") from None


def group_type_of(group_class: type) -> GroupType:
    return _BY_CLASS[group_class]


def registered() -> dict[type, GroupType]:
    return dict(_BY_CLASS)
