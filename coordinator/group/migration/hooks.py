"""The migration hooks a shard calls at the points where Kafka converts groups."""
from __future__ import annotations

from ...config import CoordinatorConfig
from . import conversion, mixed
from .policy import MigrationPolicy


class Migration:
    def __init__(self, config: CoordinatorConfig) -> None:
        self.policy = MigrationPolicy.parse(config.consumer_migration_policy)

    upgrade_for_heartbeat = staticmethod(conversion.upgrade)
    downgrade_on_fence = staticmethod(conversion.downgrade_on_fence)
    classic_join_to_consumer_group = staticmethod(mixed.classic_join)
    classic_sync_to_consumer_group = staticmethod(mixed.classic_sync)
    classic_heartbeat_to_consumer_group = staticmethod(mixed.classic_heartbeat)
    classic_leave_to_consumer_group = staticmethod(mixed.classic_leave)
