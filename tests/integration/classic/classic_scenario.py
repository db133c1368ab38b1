"""The classic-group scenario every client runs through the gateway.

Two members form the group, a third joins, one leaves cleanly; a producer writes all
along. Afterwards: every record consumed, none twice (each handover is revoke → commit
→ release, so there is nothing to re-read), no partition owned by two members at once,
and the offsets committed at close are the ends of the partitions.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from confluent_kafka.admin import AdminClient

from support.admin import committed_offsets, create_topic
from support.ownership import OwnershipLedger
from support.produce import BackgroundProducer, ProducedRecord, produce_records
from support.wait import wait_until

PARTITIONS = 6
SETTLE_TIMEOUT = 30.0


def owned_partitions(members: Sequence, topic: str) -> list[int]:
    return sorted(p for m in members for (t, p) in m.assignment() if t == topic)


def balanced(members: Sequence, topic: str, partitions: int = PARTITIONS) -> bool:
    """Every member owns something and together they own each partition exactly once."""
    return all(m.assignment() for m in members) and owned_partitions(members, topic) == list(range(partitions))


def fatal_errors(members: Sequence) -> list[dict]:
    return [e for m in members for e in m.errors() if e.get("fatal")]


def wait_balanced(members: Sequence, topic: str, what: str, partitions: int = PARTITIONS,
                  timeout: float = SETTLE_TIMEOUT) -> None:
    """Wait for the split; a member that died (fatal error) fails the wait at once."""
    def check() -> bool:
        fatal = fatal_errors(members)
        assert fatal == [], f"{what}: a member failed: {fatal}"
        return balanced(members, topic, partitions)

    wait_until(check, timeout,
               message=lambda: f"{what}: {len(members)}-way split of {partitions} partitions; {list(members)}")


def describe_members(bootstrap: str, group: str) -> list[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep a reference: its futures die with it
    return sorted(m.member_id for m in admin.describe_consumer_groups([group])[group].result(timeout=10).members)


def consumed_counts(members: Sequence) -> Counter:
    return Counter((r.partition, r.offset) for m in members for r in m.consumed())


def wait_all_consumed(members: Sequence, produced: Sequence[ProducedRecord], timeout: float = SETTLE_TIMEOUT) -> None:
    expected = {(r.partition, r.offset) for r in produced}
    wait_until(lambda: expected <= set(consumed_counts(members)), timeout,
               message=lambda: f"{len(expected - set(consumed_counts(members)))} of {len(expected)} "
                               "records unconsumed")


def end_offsets(produced: Sequence[ProducedRecord], partitions: int = PARTITIONS) -> dict[int, int]:
    """Next offset per partition (-1001, librdkafka's 'no offset', for a partition never written)."""
    out = {p: -1001 for p in range(partitions)}
    for r in produced:
        out[r.partition] = max(out[r.partition], r.offset + 1)
    return out


def assert_clean_run(members: Sequence, produced: Sequence[ProducedRecord], ledger: OwnershipLedger) -> None:
    duplicates = sorted(k for k, n in consumed_counts(members).items() if n > 1)
    assert duplicates == [], f"records consumed more than once: {duplicates[:20]}"
    ledger.assert_no_double_ownership()
    assert ledger.records_outside_ownership([r for m in members for r in m.consumed()]) == []
    assert fatal_errors(members) == []


def join_grow_leave(bootstrap: str, topic: str, group: str, ledger: OwnershipLedger,
                    make_member: Callable[[str], object]) -> list:
    """Run the scenario; ``make_member(name)`` returns a started member of ``group``.

    Returns every member (all closed by then) for client-specific checks.
    """
    create_topic(bootstrap, topic, PARTITIONS)
    produced = produce_records(bootstrap, topic, 120)
    producer = BackgroundProducer(bootstrap, topic, interval=0.01).start()
    try:
        first = [make_member("m1"), make_member("m2")]
        wait_balanced(first, topic, "two members")
        late = make_member("m3")
        everyone = [*first, late]
        wait_balanced(everyone, topic, "a third member joined")

        leaver = first[0]
        leaver.close()
        # A LeaveGroup the coordinator honours removes the member at once; an ignored one
        # (Tansu ignores aiokafka's v0/v1 leave) would keep it until its 6 s session expires.
        wait_until(lambda: len(describe_members(bootstrap, group)) == 2, 3,
                   message=lambda: f"the leaver gone from DescribeGroups: {describe_members(bootstrap, group)}")
        remaining = [first[1], late]
        wait_balanced(remaining, topic, "after m1 left")
    finally:
        produced = [*produced, *producer.stop()]

    wait_all_consumed(everyone, produced)
    # One at a time, each after a settled group: a member that closes while the rebalance its
    # predecessor's leave started is completing gets REBALANCE_IN_PROGRESS for its last commit
    # (Kafka does the same in CompletingRebalance), and that commit is then simply lost.
    first[1].close()
    wait_balanced([late], topic, "after m2 left")
    late.close()
    assert_clean_run(everyone, produced, ledger)
    assert all(m.assignment() == frozenset() for m in everyone), "a closed member still owns partitions"
    assert committed_offsets(bootstrap, group, topic, PARTITIONS) == end_offsets(produced)
    return everyone


def was_emptied_before_close(member) -> bool:
    """True if ``member`` owned nothing at some point between its first assignment and its
    own close: what an eager rebalance does, and a cooperative one (KIP-429) must not."""
    owned: set = set()
    started = False
    ownership = [e for e in member.events() if e["event"] in ("assigned", "revoked", "lost", "closed")]
    for ev in ownership[:-2]:  # the last two are the close: revoke everything, then "closed"
        tps = {tuple(tp) for tp in ev.get("partitions", ())}
        if ev["event"] == "assigned":
            owned |= tps
            started = started or bool(owned)
        elif ev["event"] in ("revoked", "lost"):
            owned -= tps
            if started and not owned:
                return True
    return False
