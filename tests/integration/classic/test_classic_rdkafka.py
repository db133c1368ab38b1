"""confluent-kafka (librdkafka) classic groups through the gateway: eager `range`
(assign/unassign of the whole set) and `cooperative-sticky` (KIP-429: incremental
assign/unassign, only moved partitions are revoked)."""
from __future__ import annotations

import pytest

from support.rdkafka import RdkafkaConsumer

from classic_scenario import join_grow_leave, was_emptied_before_close


@pytest.mark.kafka_subset
@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_join_grow_leave(assignor, kcoord, names, ledger, drivers):
    topic, group = names.topic(), names.group()

    def member(name: str) -> RdkafkaConsumer:
        return drivers.add(RdkafkaConsumer(kcoord.bootstrap, topic, group, member=f"rd-{name}", ledger=ledger,
                                           group_protocol="classic", assignment_strategy=assignor)).start()

    members = join_grow_leave(kcoord.bootstrap, topic, group, ledger, member)
    survivor = members[1]  # m2: in the group from the start to the end
    if assignor == "cooperative-sticky":
        assert all(m.incremental for m in members)
        # Cooperative: m2 never gives up everything while it stays; each revocation names
        # only the partitions that move to the newcomer.
        assert not was_emptied_before_close(survivor), survivor.events()
        assert not survivor.events("lost")
    else:
        # Eager: every rebalance revokes m2's whole assignment first (it was in three).
        assert len(survivor.events("revoked")) >= 3
