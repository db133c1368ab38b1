"""Correctness under churn with the adaptive heartbeat policy on (issue 5 §4).

Fifty real KIP-848 consumers (librdkafka, one thread each) plus two Java 4.3 consumers
share a group while a producer writes. For half a minute members leave cleanly and new
ones join in overlapping waves, so target assignments are computed while earlier ones
are still being reconciled; one Java member is killed with SIGKILL midway (its
partitions come back only through session expiry and fencing). Afterwards:

- no partition was ever owned by two members at once (OwnershipLedger, callback stamps
  on one CLOCK_MONOTONIC line across threads and JVMs);
- no record was consumed by a member that did not own its partition at that moment;
- every record produced was consumed by someone (at least once);
- the surviving members hold a complete, disjoint, balanced assignment.
"""
from __future__ import annotations

import random
import threading
import time

import pytest

from rebalance_helpers import assignment_ok
from support.admin import create_topic
from support.kcoord import KcoordProcess
from support.ownership import OwnershipLedger
from support.produce import BackgroundProducer
from support.rdkafka import RdkafkaConsumer
from support.wait import wait_until

RDKAFKA_MEMBERS = 50
PARTITIONS = 64
CHURN_S = 30.0
PER_WAVE = 4
SEED = 848
# kcoord defaults (adaptive policy, KIP-1263 assignment interval 100 ms) with a short session,
# so the killed Java member is fenced within the test.
CONFIG = ("consumer_heartbeat_policy=adaptive", "consumer_session_timeout_ms=6000",
          "consumer_min_session_timeout_ms=6000")


def close_all(members) -> None:
    """Close in parallel: a clean close waits for the revocation callback and the leave."""
    errors: list[BaseException] = []

    def close(m) -> None:
        try:
            m.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=close, args=(m,)) for m in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]


@pytest.fixture
def churn_kcoord(tansu, names):
    """Requested before ``drivers``, so the members are closed before the coordinator stops."""
    kcoord = KcoordProcess(upstream=tansu.bootstrap, state_topic=f"__kcoord_{names.topic()}", config=CONFIG).start()
    yield kcoord
    kcoord.stop()


def java_members(request, bootstrap, topic, group, ledger, drivers) -> list:
    """Two Java 4.3 members when a JDK is present (the test still runs without them)."""
    from support.java import JavaConsumer, java_available
    if not java_available():
        return []
    request.getfixturevalue("java_classes")
    return [drivers.add(JavaConsumer(bootstrap, topic, group, member=f"java-{i}", ledger=ledger,
                                     group_protocol="consumer"))
            .start(wait_ready=False) for i in range(2)]


@pytest.mark.timeout(150)
def test_fifty_members_join_and_leave_without_double_ownership_or_loss(
    churn_kcoord, names, drivers, ledger: OwnershipLedger, request):
    bootstrap = churn_kcoord.bootstrap
    topic, group = names.topic(), names.group()
    create_topic(bootstrap, topic, PARTITIONS)
    producer = BackgroundProducer(bootstrap, topic, interval=0.004).start()
    incarnation = iter(range(10_000))

    def rdkafka_member() -> RdkafkaConsumer:
        return drivers.add(RdkafkaConsumer(bootstrap, topic, group, member=f"rd-{next(incarnation)}",
                                           ledger=ledger, group_protocol="consumer"))

    java = java_members(request, bootstrap, topic, group, ledger, drivers)
    live = [rdkafka_member().start() for _ in range(RDKAFKA_MEMBERS)]
    for j in java:
        j.wait_for_event("ready", 30)
    everyone = [*live, *java]

    def balanced(members) -> bool:
        return assignment_ok({m.member: m.assignment() for m in members}, topic, PARTITIONS)

    wait_until(lambda: balanced([*live, *java]), 60, 0.1,
               lambda: f"{len(live) + 2} members balanced: {sorted(len(m.assignment()) for m in [*live, *java])}")

    rng = random.Random(SEED)
    pause = threading.Event()  # never set: paces the churn schedule
    deadline = time.monotonic() + CHURN_S
    killed = False
    waves = 0
    while time.monotonic() < deadline:
        leaving = rng.sample(live, PER_WAVE)
        live = [m for m in live if m not in leaving]
        close_all(leaving)
        joining = [rdkafka_member() for _ in range(PER_WAVE)]
        for m in joining:
            m.start()
        live += joining
        everyone += joining
        waves += 1
        if java and not killed and time.monotonic() > deadline - CHURN_S / 2:
            java[0].kill()  # no LeaveGroup: the coordinator learns only at session expiry
            killed = True
        pause.wait(rng.uniform(0.1, 1.2))  # the schedule: waves overlap running reconciliations

    survivors = [*live, *java[1:]]
    wait_until(lambda: balanced(survivors), 60, 0.1,
               lambda: f"survivors balanced: {sorted(len(m.assignment()) for m in survivors)}")
    produced = producer.stop()
    expected = {(r.partition, r.offset) for r in produced}

    def missing() -> set:
        consumed = {(r.partition, r.offset) for m in everyone for r in m.consumed()}
        return expected - consumed

    wait_until(lambda: not missing(), 60, 0.2,
               lambda: f"{len(missing())} of {len(expected)} records not consumed, e.g. {sorted(missing())[:5]}")

    ledger.assert_no_double_ownership()
    outside = ledger.records_outside_ownership([r for m in everyone for r in m.consumed()])
    assert outside == [], f"{len(outside)} records consumed without ownership, e.g. {outside[:3]}"
    fatal = [(m.member, e) for m in everyone for e in m.errors() if e.get("fatal")]
    assert fatal == [], f"fatal client errors: {fatal[:5]}"
    assert waves >= 10, f"only {waves} churn waves in {CHURN_S}s"
    print(f"churn: {waves} waves, {len(everyone)} incarnations, {len(expected)} records, "
          f"{len(ledger.events())} ownership events")
    close_all(survivors)  # in parallel; the drivers fixture would close one by one
