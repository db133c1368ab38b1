"""kcoord's group types, assembled: the one place that names every folder of the core, and
builds the shard's registry from their contributions (group_types.build_registry).

Rules:
- the folders only declare a `Contribution` (classic/, modern/consumer/, modern/connect/,
  offsets/, migration/, configs/, streams/); the APIs every group type answers (group_admin.py,
  their request shapes in admin_requests.py) are the `ADMIN` contribution below;
- `builtin_registry()` builds the registry once per process, where a shard is built
  (shard.py, when it is given no registry of its own); every timer kind of timers.py must
  have its handler then, or the build fails;
- a new group type is a folder with its `Contribution`, added to `CONTRIBUTIONS` (or passed
  to `build_registry` with them, as tests/unit/group/toy/ does); no other folder changes.
"""
from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from . import group_admin
from .admin_requests import ConsumerGroupDescribe, DeleteGroups, DescribeGroups, ListGroups
from .classic.contribution import CONTRIBUTION as CLASSIC
from .configs.contribution import CONTRIBUTION as CONFIGS
from .group_types import Contribution, Registry, build_registry
from .migration.contribution import CONTRIBUTION as MIGRATION
from .modern.connect.contribution import CONTRIBUTION as CONNECT
from .modern.consumer.contribution import CONTRIBUTION as CONSUMER
from .offsets.contribution import CONTRIBUTION as OFFSETS
from .streams.contribution import CONTRIBUTION as STREAMS
from .timers import TimerKind

if TYPE_CHECKING:
    from .context import RequestContext, ShardView
    from .result import Result


def _consumer_group_describe(shard: ShardView, ctx: RequestContext, req, now_ms: int) -> Result:
    return group_admin.consumer_group_describe(shard, ctx, req)


def _describe_groups(shard: ShardView, ctx: RequestContext, req, now_ms: int) -> Result:
    return group_admin.describe_groups(shard, ctx, req)


def _list_groups(shard: ShardView, ctx: RequestContext, req, now_ms: int) -> Result:
    return group_admin.list_groups(shard, ctx, req)


ADMIN = Contribution(
    name="admin",
    operations=(("consumer_group_describe", None, _consumer_group_describe),
                ("describe_groups", None, _describe_groups),
                ("list_groups", None, _list_groups),
                ("delete_groups", None, group_admin.delete_groups)),
    request_shapes={"consumer_group_describe": ConsumerGroupDescribe, "describe_groups": DescribeGroups,
                    "list_groups": ListGroups, "delete_groups": DeleteGroups},
)

# The order is the order of the timers a loaded shard arms (the retention check first).
CONTRIBUTIONS: tuple[Contribution, ...] = (OFFSETS, CLASSIC, CONSUMER, MIGRATION, CONNECT, ADMIN, CONFIGS, STREAMS)


def registry_with(*extra: Contribution) -> Registry:
    """The built-in types plus `extra` (a test's or a tool's own group type)."""
    registry = build_registry((*CONTRIBUTIONS, *extra))
    missing = {k.value for k in TimerKind} - registry.timers.keys()
    if missing:
        raise ValueError(f"timer kinds without a handler: {sorted(missing)}")
    return registry


@cache
def builtin_registry() -> Registry:
    return registry_with()
