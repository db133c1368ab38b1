"""Cross-process ledger and the two abrupt stops: a Java member killed with -9, and a
librdkafka member that stops polling (cooperative-sticky, so incremental callbacks)."""
from __future__ import annotations

import time

import pytest

from support.admin import create_topic
from support.java import TANSU_BASELINE_JARS, JavaConsumer
from support.produce import produce_records
from support.rdkafka import RdkafkaConsumer
from support.wait import wait_until

# Shorter than the 6 s default: each Tansu rebalance costs ~session/2 and a kill costs a session.
SESSION_MS = 3000


@pytest.mark.java
def test_java_and_rdkafka_share_a_group_and_kill_9_hands_over(tansu, names, ledger, drivers, java_classes) -> None:
    topic, group = names.topic(), names.group()
    create_topic(tansu.bootstrap, topic, 4)
    produced = produce_records(tansu.bootstrap, topic, 80)
    rd = drivers.add(RdkafkaConsumer(tansu.bootstrap, topic, group, member="rd", ledger=ledger,
                                     assignment_strategy="range", session_timeout_ms=SESSION_MS))
    java = drivers.add(JavaConsumer(tansu.bootstrap, topic, group, member="java", ledger=ledger, assignor="range",
                                        session_timeout_ms=SESSION_MS, jars=TANSU_BASELINE_JARS))
    rd.start()
    java.start()
    wait_until(lambda: len(rd.assignment()) == 2 and len(java.assignment()) == 2, 20,
               message=lambda: f"2+2 split: {rd!r} {java!r}")

    killed_at = time.monotonic()
    assert java.kill() == -9
    # No LeaveGroup: the coordinator hands java's partitions over only when its session expires.
    rd.wait_for_assignment(lambda a: len(a) == 4, 20)
    handover = time.monotonic() - killed_at
    assert handover > SESSION_MS / 2000, f"handover after {handover:.1f}s: faster than any session expiry"

    expected = {r.value for r in produced}
    rd.wait_for(lambda: expected <= {r.value for r in rd.consumed()} | {r.value for r in java.consumed()}, 20,
                "every record consumed by one of the members")
    ledger.assert_no_double_ownership()
    assert ledger.records_outside_ownership(rd.consumed() + java.consumed()) == []
    members = {e.member for e in ledger.events()}
    assert members == {"rd", "java"}


def test_rdkafka_cooperative_abrupt_stop_hands_over_after_max_poll_interval(tansu, names, ledger, drivers) -> None:
    topic, group = names.topic(), names.group()
    create_topic(tansu.bootstrap, topic, 4)
    common = dict(ledger=ledger, assignment_strategy="cooperative-sticky", session_timeout_ms=SESSION_MS,
                  max_poll_interval_ms=SESSION_MS)  # librdkafka requires max.poll.interval >= session
    stays = drivers.add(RdkafkaConsumer(tansu.bootstrap, topic, group, member="stays", **common))
    stops = drivers.add(RdkafkaConsumer(tansu.bootstrap, topic, group, member="stops", **common))
    stays.start()
    stays.wait_for_assignment(lambda a: len(a) == 4, 20)
    stops.start()
    wait_until(lambda: len(stays.assignment()) == 2 and len(stops.assignment()) == 2, 25,
               message=lambda: f"cooperative 2+2 split: {stays!r} {stops!r}")
    assert stays.incremental and not stays.events("lost")
    # Cooperative: "stays" gave up only 2 partitions, it never revoked everything.
    assert all(len(e["partitions"]) <= 2 for e in stays.events("revoked"))

    stops.stop_abruptly()
    assert stops.events("gone") and not stops.events("closed")
    stays.wait_for_assignment(lambda a: len(a) == 4, 25)
    produced = produce_records(tansu.bootstrap, topic, 40)
    stays.wait_for(lambda: {r.value for r in produced} <= set(stays.consumed_values()), 15, "records after handover")
    ledger.assert_no_double_ownership()
