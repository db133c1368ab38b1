"""kcoord with its *default* settings (not Kafka-equivalent mode) against Kafka 4.4 with its
defaults: the KIP-848 join-reconcile-leave scenario must differ only where docs/design/differential.md
says it does on purpose, the heartbeat intervals (kcoord's adaptive policy: short while a
member has work pending, a stable interval otherwise; Kafka: a fixed 5 s). Everything else
(errors, epochs, assignments, describe) stays identical: the policy changes when members
heartbeat, not what the coordinator answers.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from support.differential import (
    Coordinator,
    RawMember,
    Transcript,
    describe_consumer_group,
    differences,
    heartbeat_view,
    member_ids,
    wait_assignment_interval,
    wait_for_coordinator,
)
from support.kcoord import KcoordProcess

PARTITIONS = 6


@pytest.fixture
def default_kcoord(kafka44) -> Iterator[Coordinator]:
    gateway = KcoordProcess(upstream=kafka44.bootstrap, state_topic=f"__kcoord_default_{uuid.uuid4().hex[:8]}",
                            config=()).start()
    yield Coordinator("kcoord", gateway.bootstrap)
    gateway.stop()


def two_members(t: Transcript, group: str, topic: str, ids: list[str]) -> Transcript:
    wait_for_coordinator(t.side, group)          # no group config: Kafka's own defaults
    a, b = (RawMember(t.side, group, i, topics=(topic,)) for i in ids)
    t.add("A joins", heartbeat_view(a.heartbeat()))
    t.add("A stable", heartbeat_view(a.heartbeat()))
    wait_assignment_interval(time.monotonic())
    t.add("B joins", {**heartbeat_view(b.heartbeat()), "assignment": b.owned_count()})
    t.add("A asked to revoke", {**heartbeat_view(a.heartbeat()), "assignment": a.owned_count()})

    def settled(_: object) -> bool:
        b.heartbeat()
        return a.owned_count() == b.owned_count() == PARTITIONS // 2 and a.epoch == b.epoch
    a.heartbeat_until(settled, message="3 partitions each")
    t.add("A reconciled", {**heartbeat_view(a.heartbeat()), "assignment": a.owned_count()})
    t.add("B reconciled", {**heartbeat_view(b.heartbeat()), "assignment": b.owned_count()})
    described = describe_consumer_group(t.side, group)
    for m in described["members"]:
        m["assignment"], m["target_assignment"] = len(m["assignment"]), len(m["target_assignment"])
    t.add("describe", described)
    t.add("A leaves", heartbeat_view(a.leave()))
    t.add("B leaves", heartbeat_view(b.leave()))
    return t


def test_default_settings_differ_only_in_heartbeat_intervals(sides, default_kcoord, names, topic):
    group, ids = names.group(), member_ids(2)
    kafka, kcoord = (two_members(Transcript(side), group, topic, ids) for side in (sides[0], default_kcoord))
    diff = differences(dict(kafka), dict(kcoord))
    assert diff, "kcoord's default heartbeat policy should answer other intervals than Kafka's fixed 5 s"
    assert all(d.split(":")[0].endswith(".heartbeat_interval") for d in diff), diff
    intervals = {step: (kafka[step]["heartbeat_interval"], kcoord[step]["heartbeat_interval"])
                 for step in kafka if "heartbeat_interval" in kafka[step] and kafka[step]["member_epoch"] >= 0}
    assert all(k == 5000 and 0 < c < 5000 for k, c in intervals.values()), intervals
    print("heartbeat intervals (kafka, kcoord):", intervals)
