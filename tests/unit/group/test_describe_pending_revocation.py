"""ConsumerGroupDescribe of a member that has not yet revoked partitions (issue 11 §5, seen by
replaying Kafka 4.3's own log: tests/integration/ops/test_ops_kafka_log.py).

Kafka 4.3.1's `ConsumerGroupMember.asConsumerGroupDescribeMember` builds the member's
Assignment from its assigned partitions AND its partitions pending revocation (both go
through `accumulateTopicPartitions`, assigned first): a member in UNREVOKED_PARTITIONS is
described with every partition it still owns, while its TargetAssignment already lacks the
ones to revoke. kcoord described the assigned partitions only."""
from __future__ import annotations

from coordinator.group.modern.consumer.group import MemberState

from .context import ShardContext, ok
from .test_consumer_heartbeat import FOO, fast
from .test_issue10_divergences import _describe


def _described(c: ShardContext) -> dict:
    return {m.member_id: ({t.topic_name: list(t.partitions) for t in m.assignment.topic_partitions},
                          {t.topic_name: sorted(t.partitions) for t in m.target_assignment.topic_partitions})
            for m in _describe(c, "g").members}


def test_a_member_with_partitions_pending_revocation_is_described_with_them():
    c = ShardContext(FOO, config=fast())
    ok(c.heartbeat("g", "m1", 0, topics=["foo"]))
    ok(c.heartbeat("g", "m2", 0, topics=["foo"]))
    r1 = c.heartbeat("g", "m1", 2, owned={"foo": range(6)})
    m1 = c.member("g", "m1")
    assert m1.state is MemberState.UNREVOKED_PARTITIONS
    kept = sorted(c.assigned(r1)["foo"])
    revoking = sorted(set(range(6)) - set(kept))

    described = _described(c)
    # Assigned first, then pending revocation (Kafka's list order); the target has the kept ones.
    assert described["m1"] == ({"foo": kept + revoking}, {"foo": kept})
    assert described["m2"] == ({}, {"foo": revoking})
    # The same after a reload from the log (what `kcoord offsets load` + serve answers).
    c.shard = c.reload()
    assert _described(c) == described

    ok(c.heartbeat("g", "m1", 2, owned={"foo": kept}))       # revoked: only the kept ones now
    assert _described(c)["m1"] == ({"foo": kept}, {"foo": kept})
