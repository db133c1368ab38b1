"""A `__consumer_offsets` log written by Kafka 4.4's own streams coordinator (KIP-1071) replays,
through kcoord's loader, to what Kafka's StreamsGroupDescribe reported.

Two raw StreamsGroupHeartbeat (88) members of one application form a group on Kafka 4.4 (its
default `group.coordinator.rebalance.protocols` serves streams): a topology of one subtopology
reading a 4-partition source topic, with a changelog Kafka creates. They heartbeat as a Streams
client does (report the tasks they hold, take what they are given) until the describe (89) shows
the group Stable with every task active once. Then the group's `__consumer_offsets` partition is
read raw (Fetch, ops/live.py, every partition) and replayed by the bulk load a shard load uses (ops.materialise ->
coordinator.group.bulk_replay): the streams group kcoord builds must have Kafka's members, epochs,
assignments and topology. The shared session broker (`kafka44`) serves, so the group's name is
unique.
"""
from __future__ import annotations

import datetime
import uuid

import pytest

from coordinator.group.streams.model import StreamsGroup
from ops.live import TopicReader
from ops.logsource import Problems
from ops.materialise import OffsetsReplay
from support.admin import create_topic
from support.raw_client import call_with, request_types
from support.wait import wait_until

FIND_COORDINATOR, STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE = 10, 88, 89
SOURCE_PARTITIONS = 4

# Kafka creates `__consumer_offsets` on the first FindCoordinator; until it is loaded the
# group's coordinator answers these.
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16

pytestmark = pytest.mark.timeout(180)


def _ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


class Member:
    """A raw streams member: it holds exactly the active tasks it was last given."""

    def __init__(self, address, group: str, topology, name: str) -> None:
        self.address, self.group, self.topology = address, group, topology
        self.member_id, self.process_id, self.name = str(uuid.uuid4()), str(uuid.uuid4()), name
        self.epoch = 0
        self.active: dict[str, tuple[int, ...]] = {}

    def heartbeat(self) -> bool:
        """One heartbeat; False while the coordinator is not ready yet."""
        h = request_types(STREAMS_GROUP_HEARTBEAT, 0)
        joining = self.epoch == 0
        held = tuple(h.TaskIds(subtopology_id=s, partitions=ps) for s, ps in sorted(self.active.items()))
        resp = call_with(
            self.address, STREAMS_GROUP_HEARTBEAT, 0, group_id=self.group, member_id=self.member_id,
            member_epoch=self.epoch, endpoint_information_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout=_ms(30_000 if joining else -1), topology=self.topology if joining else None,
            active_tasks=held, standby_tasks=(), warmup_tasks=(),
            process_id=self.process_id if joining else None, user_endpoint=None,
            client_tags=() if joining else None, task_offsets=None, task_end_offsets=None,
            shutdown_application=False)
        if resp.error_code in (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR):
            return False
        assert resp.error_code == 0, (self.name, resp.error_code, resp.error_message)
        self.epoch = resp.member_epoch
        if resp.active_tasks is not None:
            self.active = {t.subtopology_id: tuple(sorted(t.partitions)) for t in resp.active_tasks if t.partitions}
        return True


def _describe(address, group: str):
    resp = call_with(address, STREAMS_GROUP_DESCRIBE, 0, group_ids=(group,), include_authorized_operations=False)
    (g,) = resp.groups
    assert g.error_code == 0, (g.error_code, g.error_message)
    return g


def _tasks(task_ids) -> dict[str, list[int]]:
    return {t.subtopology_id: sorted(t.partitions) for t in task_ids or () if t.partitions}


def _settled(members: list[Member], address, group: str):
    if not all([m.heartbeat() for m in members]):
        return None
    g = _describe(address, group)
    actives = [p for m in g.members for t in m.assignment.active_tasks for p in t.partitions]
    if (g.group_state == "Stable" and len(g.members) == len(members)
            and sorted(actives) == list(range(SOURCE_PARTITIONS))
            and all(m.member_epoch == g.group_epoch and _tasks(m.assignment.active_tasks) for m in g.members)):
        return g
    return None


def _topology(subtopologies) -> list[tuple]:
    """Kafka's described subtopologies and kcoord's replayed ones (the same attribute names)."""
    return sorted((s.subtopology_id, tuple(sorted(s.source_topics)), tuple(sorted(s.repartition_sink_topics)),
                   tuple(sorted(t.name for t in s.state_changelog_topics)),
                   tuple(sorted(t.name for t in s.repartition_source_topics)))
                  for s in subtopologies)


def test_kafkas_streams_group_log_replays_to_what_kafka_described(kafka44):
    address = ("127.0.0.1", kafka44.port)
    app = f"replay-{uuid.uuid4().hex[:8]}"
    source = f"{app}-in"
    create_topic(kafka44.bootstrap, source, SOURCE_PARTITIONS, timeout=30)
    h = request_types(STREAMS_GROUP_HEARTBEAT, 0)
    changelog = h.TopicInfo(name=f"{app}-store-changelog", partitions=0, replication_factor=0, topic_configs=())
    topology = h.Topology(epoch=0, subtopologies=(h.Subtopology(
        subtopology_id="0", source_topics=(source,), source_topic_regex=(), state_changelog_topics=(changelog,),
        repartition_sink_topics=(), repartition_source_topics=(), copartition_groups=()),))
    members = [Member(address, app, topology, f"m{i}") for i in (1, 2)]
    wait_until(lambda: call_with(address, FIND_COORDINATOR, 3, key=app, key_type=0).error_code == 0, 60, 0.3,
               "Kafka names the group's coordinator (and so has created __consumer_offsets)")
    kafka = wait_until(lambda: _settled(members, address, app), 60, 0.3,
                       lambda: f"a Stable group of 2 members on Kafka: {_describe(address, app)}")

    # Every partition (5 on the test broker): the group is wherever Kafka put it.
    replay = OffsetsReplay().feed_all(TopicReader(kafka44.bootstrap, "__consumer_offsets").read(Problems()))
    assert not replay.problems.items and not replay.unknown_record_types().keys() & {17, 19, 20, 21, 22, 23}
    _, group = replay.groups()[app]
    assert isinstance(group, StreamsGroup)

    assert (group.group_epoch, group.target_assignment_epoch) == (kafka.group_epoch, kafka.assignment_epoch)
    assert group.topology.epoch == kafka.topology.epoch
    assert _topology(group.topology.subtopologies) == _topology(kafka.topology.subtopologies)
    described = {m.member_id: m for m in kafka.members}
    assert set(group.members) == set(described) == {m.member_id for m in members}
    for member_id, k in described.items():
        m = group.members[member_id]
        assert (m.member_epoch, m.process_id, m.client_id, m.client_host, m.topology_epoch, m.instance_id) == \
            (k.member_epoch, k.process_id, k.client_id, k.client_host, k.topology_epoch, k.instance_id)
        for kind in ("active", "standby", "warmup"):
            assert _tasks_of(getattr(m.assigned, kind)) == _tasks(getattr(k.assignment, f"{kind}_tasks")), kind
            target = group.target.get(member_id)
            assert _tasks_of(getattr(target, kind)) == _tasks(getattr(k.target_assignment, f"{kind}_tasks")), kind
    # Kafka writes a streams member's State as its own MemberState byte (STABLE 1, UNREVOKED_TASKS 2,
    # UNRELEASED_TASKS 3; a consumer member's STABLE is 0): a Stable group has only STABLE members.
    assert {m.state.name for m in group.members.values()} == {"STABLE"}
    assert group.state().value == kafka.group_state


def _tasks_of(tasks) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for sub, p in tasks:
        out.setdefault(sub, []).append(p)
    return {s: sorted(ps) for s, ps in out.items()}

