"""What a handler sees: the request's `RequestContext`, and its shard as a `ShardView`.

Rules of the group core (the package opening, coordinator/group/__init__.py, has the rest):
- A handler takes `(shard, ctx, request, now_ms)` and returns a `Result`; `shard` is typed
  as its folder's view (classic/: `ClassicView`, modern/consumer/: `ConsumerView` in
  modern/consumer/view.py, modern/connect/: `ConnectView`, offsets/: `OffsetsView`; the
  kernel and migration/, which span types, see `ShardView`), so mypy shows what each type
  reads. It imports this module, never shard.py: the shard sits on top of its handlers and
  dispatches to them, and nothing below it imports it back (import-linter checks it).
- Handlers read state through the view and change it only by returning records, which the
  shard replays (`apply`). The exceptions are Kafka's own, and only these:
  1. classic-group handlers change their `ClassicGroup` in memory and write GroupMetadata
     for durability only (`Result.replay=False`, Kafka's `replayRecords=false`);
  2. a protocol conversion swaps the group object in `groups` in memory, for the same
     reason (migration/conversion.py; Kafka converts with replayRecords=false too);
  3. soft state no record holds: `ConsumerGroup.metadata_refresh_requested` (cleared by the
     heartbeat that refreshed it), the parked JoinGroup/SyncGroup tokens, and the topic
     filter of the heartbeat that last asked for a regex refresh (modern/consumer/regex_refresh.py: Kafka's
     refresh task closes over that member's request context the same way).
- The view is state and configuration only. The decisions several handlers share live
  in the module that owns each rule, written once, and take the view (or just the
  config) as an argument: the session timeout and heartbeat interval in
  modern/consumer/heartbeat_policy.py, KIP-1263 assignment pacing in modern/consumer/assignment_pacing.py, fencing in
  modern/consumer/membership.py (`fence`), regex refresh in modern/consumer/regex_refresh.py. A handler that needs
  another API's behaviour calls its handler function (mixed.py calls
  `classic_join.join_group`), never back through the shard.
- Which handler serves a request can depend on the type of the group it names: the shard
  looks it up in its registry's operations rows (operations.py, group_types.Registry). That
  is how migration/ serves the classic APIs on a consumer group with no object on the view
  for handlers to call.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..config import CoordinatorConfig
    from .image import MetadataImage
    from .offset_store import OffsetStore


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_version: int
    client_id: str = ""
    client_host: str = ""
    # Groups of a multi-group request the client may not act on (coordinator/authz.py):
    # their entries answer GROUP_AUTHORIZATION_FAILED.
    denied_groups: frozenset[str] = frozenset()
    # With an authorizer, the service builds an AuthorizedRequestContext (below) for
    # ConsumerGroupHeartbeat; not a field here: one more field costs every construction on
    # the heartbeat path without an authorizer (about 1.3k instructions, callgrind).


@dataclass(frozen=True, slots=True)
class AuthorizedRequestContext(RequestContext):
    """A RequestContext with the requesting client's topic filter: the topics of a set it may
    DESCRIBE (the service binds it to the client). Regex resolution keeps only those
    (KAFKA-18813, modern/consumer/regex_refresh.py)."""

    topic_filter: TopicFilter | None = None


# names -> the names the requesting client may DESCRIBE
TopicFilter = Callable[[Collection[str]], frozenset[str]]


class GroupsView(Protocol):
    """What every handler sees of its shard: the configuration, the groups, the log."""

    @property
    def config(self) -> CoordinatorConfig: ...

    @property
    def groups(self) -> dict[str, Any]:
        """Every group of the shard, of any registered type (group_types.py): a handler
        narrows a group to its own folder's class before it reads it."""
        ...

    @property
    def log(self) -> logging.Logger: ...


class ClassicView(GroupsView, Protocol):
    """What classic/ sees: parked JoinGroup/SyncGroup requests need tokens."""

    def next_token(self) -> int:
        """A token for a parked JoinGroup/SyncGroup (the runtime maps it to the client)."""
        ...


class ConnectView(GroupsView, Protocol):
    """What modern/connect/ sees: nothing beyond the groups (its rounds live in its groups)."""


class OffsetsView(GroupsView, Protocol):
    """What offsets/ sees: the committed offsets, and topics (commits to unknown ones fail)."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def offsets(self) -> OffsetStore: ...


class ShardView(ClassicView, OffsetsView, ConnectView, Protocol):
    """A shard as the kernel's handlers see it (`GroupCoordinatorShard` implements it); each
    folder's handlers see only their own view (modern/consumer/view.py has `ConsumerView`;
    migration/, which spans classic and consumer groups, sees this one too). The members
    a group type's folder keeps on the shard are typed there, not here: the kernel names no
    folder."""

    @property
    def partition(self) -> int: ...

    @property
    def assignors(self) -> Mapping[str, Any]: ...

    @property
    def last_image_version_with_new_topics(self) -> int: ...

    @property
    def heartbeat_policy(self) -> Any:
        """modern/consumer/heartbeat_policy.HeartbeatIntervalPolicy (the consumer
        contribution attaches it)."""
        ...

    @property
    def client_assignments(self) -> dict[str, Any]: ...
