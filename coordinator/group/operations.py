"""Which handler serves an operation for the group a request names: rows keyed by
(operation, group class), as Kafka's `GroupMetadataManager` picks `classicGroupJoinToClassicGroup`
or `classicGroupJoinToConsumerGroup` by the type of the group it finds.

Rules:
- an operation is named like the shard attribute that serves it (`join_group`,
  `consumer_group_heartbeat`, ...; the API rows' `shard_operation`); a handler is
  `handler(shard, ctx, req, now_ms) -> Result` (context.py: it sees its view, never the shard);
- a row's group class is the class of the group the request's `group_id` names; `None` is the
  row for a group id that names no group, or a group whose class has no row of its own;
- the rows come from the folders' contributions (group_types.Contribution), folded by
  `build_operations` where the shard's registry is built: nothing here changes at import,
  and each pair has one row (a second is an error there);
- lookups are pure: a handler found here is called once per request, nothing is cached
  per group.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import RequestContext, ShardView
    from .result import Result

Handler = Callable[["ShardView", "RequestContext", Any, int], "Result"]
Rows = Mapping[type | None, Handler]


def build_operations(contributions: Iterable[Iterable[tuple[str, type | None, Handler]]]
                     ) -> dict[str, dict[type | None, Handler]]:
    """The (operation, group class) -> handler table from each contribution's rows."""
    table: dict[str, dict[type | None, Handler]] = {}
    for rows in contributions:
        for operation, group_class, handler in rows:
            by_class = table.setdefault(operation, {})
            if group_class in by_class:
                who = "the default row" if group_class is None else group_class.__name__
                raise ValueError(f"operation {operation!r} already has a handler for {who}")
            by_class[group_class] = handler
    return table


def handler_for(rows: Rows, operation: str, group: Any) -> Handler:
    """The row for `group`'s class, else the default row."""
    if group is not None:
        handler = rows.get(type(group))
        if handler is not None:
            return handler
    try:
        return rows[None]
    except KeyError:
        raise KeyError(f"operation {operation!r} has no handler for {type(group).__name__}") from None
