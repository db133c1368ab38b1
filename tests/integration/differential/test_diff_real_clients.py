"""Real clients (librdkafka and the Java 4.3 client) in one group that goes through every
protocol configuration, on Kafka 4.3 and on kcoord in front of it, compared by invariants
rather than field by field (client timing makes the exact sequence of responses differ):

    2 classic members → one replaced by a consumer-protocol member (online upgrade: the group
    becomes a consumer group with a classic member) → the other replaced too (a pure KIP-848
    group) → one replaced by a classic member (mixed again) → the last consumer-protocol member
    leaves (online downgrade: a classic group again) → the last member drains and leaves.

At each stage both runs must reach the same group type and state with the same balance; at
the end every produced record was consumed, the committed offsets equal the end offsets, and
no partition was ever owned by two members at once (support.ownership). A second scenario
restarts a static librdkafka member (group.instance.id) of a KIP-848 group: it gets its
partitions back and the other member is not disturbed, on both.
"""
from __future__ import annotations

import time

import pytest

from support.admin import committed_offsets
from support.differential import Coordinator, assert_same, list_groups, prepare_group
from support.ownership import OwnershipLedger
from support.produce import BackgroundProducer
from support.wait import wait_until

PARTITIONS = 6


def new_member(client: str, side: Coordinator, topic: str, group: str, name: str, protocol: str,
               ledger: OwnershipLedger, drivers):
    if client == "java":
        from support.java import JavaConsumer

        return drivers.add(JavaConsumer(side.address, topic, group, member=name, ledger=ledger,
                                        group_protocol=protocol)).start()
    from support.rdkafka import RdkafkaConsumer

    return drivers.add(RdkafkaConsumer(side.address, topic, group, member=name, ledger=ledger,
                                       group_protocol=protocol)).start()


def settle(side: Coordinator, group: str, members: list, group_type: str) -> dict:
    """Wait until the members hold every partition, balanced, and the group is Stable with
    ``group_type``; what was reached (type, state, sorted partition counts)."""
    def reached() -> dict | None:
        sizes = sorted(len(m.assignment()) for m in members)
        [row] = list_groups(side, {group}) or [{}]
        view = {"type": row.get("group_type"), "state": row.get("group_state"), "sizes": sizes}
        balanced = sum(sizes) == PARTITIONS and sizes[-1] - sizes[0] <= 1
        return view if balanced and view["type"] == group_type and view["state"] == "Stable" else None

    return wait_until(reached, 45, 0.1, lambda: f"{side.name}: {group} balanced as a Stable {group_type} group "
                      f"({[(m.member, sorted(tp.partition for tp in m.assignment())) for m in members]}, "
                      f"{list_groups(side, {group})})")


def roll_through_protocols(side: Coordinator, client: str, topic: str, group: str, drivers) -> dict:
    prepare_group(side, group)
    ledger = OwnershipLedger()
    producer = BackgroundProducer(side.address, topic, interval=0.02).start()
    members: list = []

    def start(name: str, protocol: str):
        member = new_member(client, side, topic, group, f"{side.name}-{name}", protocol, ledger, drivers)
        members.append(member)
        return member

    stages, seconds = {}, {}

    def stage(name: str, began: float, members: list, group_type: str) -> None:
        stages[name] = settle(side, group, members, group_type)
        seconds[name] = round(time.monotonic() - began, 1)

    began = time.monotonic()
    c1, c2 = start("c1", "classic"), start("c2", "classic")
    stage("classic", began, [c1, c2], "classic")
    began = time.monotonic()
    c1.close()
    k1 = start("k1", "consumer")
    stage("upgraded, mixed", began, [c2, k1], "consumer")
    began = time.monotonic()
    c2.close()
    k2 = start("k2", "consumer")
    stage("consumer only", began, [k1, k2], "consumer")
    began = time.monotonic()
    k1.close()
    c3 = start("c3", "classic")
    stage("mixed again", began, [k2, c3], "consumer")
    began = time.monotonic()
    k2.close()
    stage("downgraded", began, [c3], "classic")

    produced = producer.stop()
    wanted = {r.value for r in produced}
    c3.wait_for(lambda: wanted <= {r.value for m in members for r in m.consumed()}, 30, "every record consumed")
    c3.close()
    ends = {p: max((r.offset + 1 for r in produced if r.partition == p), default=0) for p in range(PARTITIONS)}
    return {
        "stages": stages,
        "records produced": len(produced) > 50,
        "committed offsets are the end offsets": committed_offsets(side.address, group, topic, PARTITIONS) == ends,
        "double ownership": [str(v) for v in ledger.violations()],
        "errors": [e for m in members for e in m.errors()],
        "seconds to settle": seconds,     # informative only (client timing): not compared
    }


@pytest.mark.timeout(200)
@pytest.mark.parametrize("client", ["rdkafka", pytest.param("java", marks=pytest.mark.java)])
def test_rolling_upgrade_and_downgrade_with_real_clients(client, sides, names, topic, drivers, request):
    if client == "java":
        request.getfixturevalue("java_classes")
    group = names.group()
    kafka, kcoord = (roll_through_protocols(side, client, topic, group, drivers) for side in sides)
    print(f"{client} seconds to settle: kafka {kafka.pop('seconds to settle')}, "
          f"kcoord {kcoord.pop('seconds to settle')}")
    assert kafka["committed offsets are the end offsets"] and kafka["double ownership"] == [], kafka
    assert_same(kafka, kcoord)


def static_restart(side: Coordinator, topic: str, group: str, drivers) -> dict:
    """Two static librdkafka members (group.instance.id, group.protocol=consumer); one is closed
    and restarted under the same instance id within the session timeout."""
    from support.rdkafka import RdkafkaConsumer

    prepare_group(side, group)
    ledger = OwnershipLedger()

    def start(name: str, instance: str):
        return drivers.add(RdkafkaConsumer(side.address, topic, group, member=f"{side.name}-{name}", ledger=ledger,
                                           group_protocol="consumer", group_instance_id=instance)).start()

    stay, leaver = start("stay", "instance-stay"), start("leaver", "instance-leaver")
    reached = {"before": settle(side, group, [stay, leaver], "consumer")}
    kept, before = stay.assignment(), leaver.assignment()
    revocations = len(stay.events("revoked"))
    leaver.close()
    back = start("back", "instance-leaver")
    reached["after"] = settle(side, group, [stay, back], "consumer")
    result = {
        "reached": reached,
        "restarted instance got its partitions back": back.assignment() == before,
        "the other member kept its partitions": stay.assignment() == kept,
        "the other member revoked nothing": len(stay.events("revoked")) == revocations,
        "double ownership": [str(v) for v in ledger.violations()],
    }
    stay.close()
    back.close()
    return result


def test_static_member_restart_with_librdkafka(sides, names, topic, drivers):
    group = names.group()
    kafka, kcoord = (static_restart(side, topic, group, drivers) for side in sides)
    assert kafka["restarted instance got its partitions back"] and kafka["the other member kept its partitions"]
    assert kafka["double ownership"] == [], kafka
    assert_same(kafka, kcoord)
