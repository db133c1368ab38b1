"""Which handler serves an operation for the group a request names: rows keyed by
(operation, group class), as Kafka's `GroupMetadataManager` picks `classicGroupJoinToClassicGroup`
or `classicGroupJoinToConsumerGroup` by the type of the group it finds.

Rules:
- an operation is named like the shard method that serves it (`join_group`,
  `consumer_group_heartbeat`, ...); a handler is `handler(shard, ctx, req, now_ms) -> Result`
  (context.py: it sees the view, never the shard);
- a row's group class is the class of the group the request's `group_id` names; `None` is the
  row for a group id that names no group, or a group whose class has no row of its own;
- each pair has one row (a second registration is an error, found at import); rows are added
  at import by the module that owns the handlers: shard.py for the built-in group types, in
  one block; a new group type adds its own rows and edits no other folder;
- lookups are pure: a handler found here is called once per request, nothing is cached
  per group.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import RequestContext, ShardView
    from .result import Result

Handler = Callable[["ShardView", "RequestContext", Any, int], "Result"]

_ROWS: dict[str, dict[type | None, Handler]] = {}


def register_operation(operation: str, handler: Handler, group_class: type | None = None) -> None:
    """Serve `operation` with `handler` for groups of `group_class` (None: the default row)."""
    rows = _ROWS.setdefault(operation, {})
    if group_class in rows:
        who = "the default row" if group_class is None else group_class.__name__
        raise ValueError(f"operation {operation!r} already has a handler for {who}")
    rows[group_class] = handler


def handler_for(operation: str, group: Any) -> Handler:
    """The row for `group`'s class, else the default row; KeyError for an unknown operation."""
    rows = _ROWS[operation]
    if group is not None:
        handler = rows.get(type(group))
        if handler is not None:
            return handler
    try:
        return rows[None]
    except KeyError:
        raise KeyError(f"operation {operation!r} has no handler for {type(group).__name__}") from None


def rows_of(operation: str) -> dict[type | None, Handler]:
    """The live rows of one operation (rows added later show in it): the shard keeps it to
    pick a handler on its hot paths with two dict look-ups and no call."""
    return _ROWS.setdefault(operation, {})


def operations() -> dict[str, dict[type | None, Handler]]:
    """A copy of the table (tests and tools read it)."""
    return {op: dict(rows) for op, rows in _ROWS.items()}
