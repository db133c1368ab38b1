"""librdkafka consumers in one classic group against a real Tansu: join, late join, clean leave."""
from __future__ import annotations

import time

from support.admin import committed_offsets, create_topic
from support.ownership import OwnershipLedger
from support.produce import BackgroundProducer, produce_records
from support.rdkafka import RdkafkaConsumer
from support.wait import wait_until

PARTITIONS = 12
ALL = frozenset(range(PARTITIONS))


def _balanced(members: list[RdkafkaConsumer], topic: str) -> bool:
    """Every member owns something and the members own every partition exactly once."""
    assignments = [m.assignment() for m in members]
    owned = [p for a in assignments for (t, p) in a if t == topic]
    return all(assignments) and len(owned) == PARTITIONS and set(owned) == ALL


def test_three_consumers_late_joiner_and_clean_leave(tansu, names, ledger: OwnershipLedger, drivers) -> None:
    topic, group = names.topic(), names.group()
    create_topic(tansu.bootstrap, topic, PARTITIONS)
    produced = produce_records(tansu.bootstrap, topic, 240)
    producer = BackgroundProducer(tansu.bootstrap, topic, interval=0.01).start()

    def consumer(name: str) -> RdkafkaConsumer:
        return drivers.add(RdkafkaConsumer(tansu.bootstrap, topic, group, member=name, ledger=ledger,
                                           session_timeout_ms=6000)).start()

    started = time.monotonic()
    first = [consumer(f"rd-{i}") for i in (1, 2, 3)]
    wait_until(lambda: _balanced(first, topic), 20, message=lambda: f"3-way split: {first}")
    t_three = time.monotonic() - started

    late = consumer("rd-4")
    everyone = [*first, late]
    wait_until(lambda: _balanced(everyone, topic), 20, message=lambda: f"4-way split: {everyone}")
    t_four = time.monotonic() - started

    leaver = first[1]
    leaver.close()
    assert leaver.events("closed"), "clean close did not finish"
    assert leaver.assignment() == frozenset(), "close() must revoke everything before leaving"
    remaining = [m for m in everyone if m is not leaver]
    wait_until(lambda: _balanced(remaining, topic), 20, message=lambda: f"split after leave: {remaining}")
    t_leave = time.monotonic() - started

    produced += producer.stop()
    expected = {r.value for r in produced}
    consumed = lambda: {r.value for m in everyone for r in m.consumed()}  # noqa: E731
    wait_until(lambda: expected <= consumed(), 20,
               message=lambda: f"{len(expected - consumed())} of {len(expected)} produced records unconsumed")

    ledger.assert_no_double_ownership()
    all_records = [r for m in everyone for r in m.consumed()]
    assert ledger.records_outside_ownership(all_records) == []
    assert not [e for m in everyone for e in m.errors() if e.get("fatal")]
    assert all(m.events("assigned") for m in everyone)

    # Clean closes commit what was consumed: the group's offsets reach the end of every partition.
    for m in remaining:
        m.close()
    end = {}
    for r in produced:
        end[r.partition] = max(end.get(r.partition, 0), r.offset + 1)
    assert committed_offsets(tansu.bootstrap, group, topic, PARTITIONS) == {p: end.get(p, -1001) for p in ALL}
    print(f"\nrdkafka group: 3 balanced at {t_three:.1f}s, 4 at {t_four:.1f}s, after leave {t_leave:.1f}s; "
          f"{len(expected)} records, {len(all_records)} consumed, {len(ledger.events())} ownership events")
