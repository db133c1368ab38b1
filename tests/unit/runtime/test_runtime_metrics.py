"""The runtime's Kafka-named metrics: rebalances counted by group type from the records a
result writes (a steady heartbeat writes none, so it is never counted)."""
from __future__ import annotations

from prometheus_client import REGISTRY

from coordinator.group import record_helpers as rh
from coordinator.group.classic.group import ClassicGroup, ClassicGroupMember, ClassicGroupState
from coordinator.runtime.shard_runtime import _count_rebalances


def rebalances(kind: str) -> float:
    return REGISTRY.get_sample_value("kcoord_group_rebalances_total", {"type": kind}) or 0.0


def test_a_new_group_epoch_and_a_classic_generation_with_members_count_as_rebalances():
    consumer, classic = rebalances("consumer"), rebalances("classic")
    group = ClassicGroup("g", ClassicGroupState.STABLE)
    group.protocol_type, group.protocol_name, group.generation_id = "consumer", "range", 3
    group.add(ClassicGroupMember(member_id="m", group_instance_id=None, client_id="c", client_host="h",
                                 rebalance_timeout_ms=1000, session_timeout_ms=1000, protocol_type="consumer",
                                 supported_protocols=[("range", b"")]))
    _count_rebalances([rh.group_epoch_record("g", 4, 0), rh.group_metadata_record(group, {"m": b""})])
    assert (rebalances("consumer"), rebalances("classic")) == (consumer + 1, classic + 1)
    _count_rebalances([rh.group_epoch_tombstone("g"), rh.group_metadata_tombstone("g")])   # deletions
    assert (rebalances("consumer"), rebalances("classic")) == (consumer + 1, classic + 1)
