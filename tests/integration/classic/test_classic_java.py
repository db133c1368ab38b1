"""Java kafka-clients 4.3 classic groups through the gateway: eager `range`,
`cooperative-sticky` (KIP-429), and static membership (KIP-345)."""
from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient

from support.admin import create_topic
from support.produce import BackgroundProducer, produce_records

from classic_scenario import (
    PARTITIONS, balanced, join_grow_leave, wait_all_consumed, wait_balanced,
    was_emptied_before_close,
)

pytestmark = pytest.mark.usefixtures("java_classes")


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_join_grow_leave(assignor, kcoord, names, ledger, drivers):
    from support.java import JavaConsumer

    topic, group = names.topic(), names.group()

    def member(name: str) -> JavaConsumer:
        return drivers.add(JavaConsumer(kcoord.bootstrap, topic, group, member=f"java-{name}", ledger=ledger,
                                        assignor=assignor)).start()

    members = join_grow_leave(kcoord.bootstrap, topic, group, ledger, member)
    assert all(m.wait_exit(5) == 0 for m in members)
    survivor = members[1]
    generations = [e["generation"] for e in survivor.events("assigned")]
    assert generations == sorted(generations) and len(set(generations)) >= 3, generations
    if assignor == "cooperative-sticky":
        assert not was_emptied_before_close(survivor), survivor.events()
    else:
        assert was_emptied_before_close(survivor)


def described_members(bootstrap: str, group: str) -> dict[str, str]:
    """group.instance.id -> member id, from DescribeGroups."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep a reference: its futures die with it
    d = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return {m.group_instance_id: m.member_id for m in d.members}


def test_static_member_restart_keeps_assignment_without_rebalance(kcoord, names, ledger, drivers):
    """KIP-345: a static member that comes back (new member id, same group.instance.id)
    within its session timeout replaces its old self in the STABLE group: it gets its
    partitions back and nobody else rebalances. Both members are restarted in turn, so
    the group leader is among them (its rejoin gets SkipAssignment, JoinGroup v9)."""
    from support.java import JavaConsumer

    topic, group = names.topic(), names.group()
    bootstrap = kcoord.bootstrap
    create_topic(bootstrap, topic, PARTITIONS)
    produced = produce_records(bootstrap, topic, 60)
    producer = BackgroundProducer(bootstrap, topic, interval=0.01).start()

    def member(instance: str, incarnation: int) -> JavaConsumer:
        # The session must outlive a JVM restart (~1 s) by far; 10 s is within kcoord's [6 s, 30 min].
        return drivers.add(JavaConsumer(bootstrap, topic, group, member=f"{instance}.{incarnation}",
                                        ledger=ledger, assignor="range", group_instance_id=instance,
                                        session_timeout_ms=10000, heartbeat_interval_ms=1000)).start()

    current = {"s1": member("s1", 1), "s2": member("s2", 1)}
    everyone = list(current.values())
    wait_balanced(everyone, topic, "two static members")
    ids_before = described_members(bootstrap, group)
    assert set(ids_before) == {"s1", "s2"}

    for round_, instance in enumerate(("s1", "s2"), start=2):
        other = current["s2" if instance == "s1" else "s1"]
        old = current[instance]
        owned = old.assignment()
        other_owned = other.assignment()
        other_events = len(other.events())
        old.wait_for(lambda: old.events("committed"), 10, "a commit before the kill")
        killed_at = time.monotonic_ns()
        old.kill()
        new = current[instance] = member(instance, round_)
        everyone.append(new)
        new.wait_for_assignment(lambda a: a == owned, 8)
        # The group never left STABLE: the other member saw no revocation and no new assignment.
        other_since = [e for e in other.events()[other_events:] if e["event"] in ("assigned", "revoked", "lost")]
        assert other_since == [], other_since
        assert other.assignment() == other_owned
        assert (new.events("assigned")[0]["generation"]
                == other.events("assigned")[-1]["generation"]), "the restart bumped the generation"
        ids = described_members(bootstrap, group)
        assert set(ids) == {"s1", "s2"} and ids[instance] != ids_before[instance], ids
        ids_before = ids
        assert new.events("assigned")[0]["t"] > killed_at

    produced += producer.stop()
    live = list(current.values())
    wait_all_consumed(everyone, produced)
    assert balanced(live, topic)
    for m in live:
        assert m.close(how="leave") == 0
    # kill -9 gives up uncommitted progress: the successor may re-read from the last commit,
    # but never records its predecessor had committed.
    fatal = [e for m in everyone for e in m.errors() if e.get("fatal")]
    assert fatal == []
    ledger.assert_no_double_ownership()
    assert ledger.records_outside_ownership([r for m in everyone for r in m.consumed()]) == []


def test_killed_member_expires_after_its_session(kcoord, names, ledger, drivers):
    """kill -9 a dynamic member: no LeaveGroup, so the coordinator removes it only when its
    session timer fires (`heartbeat-{g}-{m}`), then rebalances; the survivor takes over
    from the dead member's last commit."""
    from support.java import JavaConsumer

    topic, group = names.topic(), names.group()
    bootstrap = kcoord.bootstrap
    create_topic(bootstrap, topic, PARTITIONS)
    produced = produce_records(bootstrap, topic, 60)
    members = [drivers.add(JavaConsumer(bootstrap, topic, group, member=f"java-{i}", ledger=ledger,
                                        assignor="cooperative-sticky", session_timeout_ms=6000)).start()
               for i in (1, 2)]
    wait_balanced(members, topic, "two members")
    wait_all_consumed(members, produced)
    victim, survivor = members
    victim.wait_for(lambda: victim.events("committed"), 10, "a commit before the kill")
    killed_at = time.monotonic()
    victim.kill()
    wait_balanced([survivor], topic, "the survivor alone", timeout=20)
    took = time.monotonic() - killed_at
    # The victim's last heartbeat was at most 1 s before the kill, so its 6 s session ends
    # 5-6 s after it; the survivor (heartbeat 1 s) then rejoins within about a second.
    assert 4.5 <= took <= 12, f"the dead member was removed {took:.1f}s after the kill (session 6 s)"
    fresh = produce_records(bootstrap, topic, 30)
    wait_all_consumed([survivor], fresh)
    # The survivor starts the victim's partitions at the victim's last commit, not before.
    victim_commits: dict[int, int] = {}
    for ev in victim.events("committed"):
        for _, p, off in ev["offsets"]:
            victim_commits[p] = max(victim_commits.get(p, -1), off)
    reread = [r for r in survivor.consumed() if r.offset < victim_commits.get(r.partition, -1)
              and r.t_ns > victim.events("gone")[0]["t"]]
    assert reread == []
    assert survivor.close() == 0
    ledger.assert_no_double_ownership()
    assert ledger.records_outside_ownership([r for m in members for r in m.consumed()]) == []
