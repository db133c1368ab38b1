"""Coordinator configuration, named and defaulted as Apache Kafka 4.3 names them.

Defaults come from Kafka's `GroupCoordinatorConfig` (reference §7). Where kcoord
departs from Kafka on purpose, the field says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class CoordinatorConfig:
    # State topic (Kafka: __consumer_offsets with offsets.topic.num.partitions = 50).
    state_topic: str = "__kcoord_offsets"
    state_topic_partitions: int = 50
    state_topic_replication_factor: int = -1  # -1 = the cluster default
    offsets_commit_timeout_ms: int = 5000  # the write timeout of every coordinator write
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    max_write_batch_bytes: int = 8 * 1024 * 1024

    # KIP-848 consumer groups.
    consumer_session_timeout_ms: int = 45_000
    consumer_min_session_timeout_ms: int = 45_000
    consumer_max_session_timeout_ms: int = 60_000
    consumer_heartbeat_interval_ms: int = 5_000  # Kafka's fixed interval (policy "fixed")
    # kcoord's heartbeat-interval policy (coordinator/group/heartbeat_policy.py): "adaptive"
    # steers members with reconciliation work to a short interval; "fixed" is Kafka's.
    consumer_heartbeat_policy: str = "adaptive"
    consumer_heartbeat_pending_interval_ms: int = 100
    consumer_heartbeat_stable_interval_ms: int = 500
    consumer_heartbeat_budget_per_second: int = 10_000
    consumer_min_heartbeat_interval_ms: int = 5_000
    consumer_max_heartbeat_interval_ms: int = 15_000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_migration_policy: str = "bidirectional"
    # KIP-1263 (4.3): target assignments are computed at most once per interval. The first
    # change after a quiet interval computes at once; a burst (a join storm) is coalesced.
    # Kafka's default is 1000 and it waits for the next heartbeat after the interval; kcoord
    # uses 100 and arms a timer, so a storm settles in about two heartbeat rounds.
    consumer_assignment_interval_ms: int = 100
    consumer_regex_refresh_interval_ms: int = 600_000
    consumer_regex_batch_refresh_min_interval_ms: int = 10_000

    # Classic groups.
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    classic_new_member_join_timeout_ms: int = 300_000

    # How often the upstream metadata image is refreshed (Kafka pushes it from
    # the controller; a gateway has to poll).
    metadata_refresh_interval_ms: int = 1_000

    extra: dict[str, str] = field(default_factory=dict)

    @property
    def default_assignor(self) -> str:
        return self.consumer_assignors[0]
