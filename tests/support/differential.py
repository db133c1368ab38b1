"""Differential testing against Apache Kafka 4.4's own group coordinator (issue 11 §4).

One scripted scenario runs twice, on two ``Coordinator``s: Kafka 4.4 itself and kcoord (in its
Kafka-equivalent configuration, KAFKA_EQUIVALENT) in front of that same Kafka. Each run writes
a transcript (an ordered dict of named, normalised responses); the two transcripts must be
equal. ``plain()`` turns kio responses into plain data and drops what legitimately differs
between two servers: throttle times, client hosts, coordinator node ids/hosts/ports,
server-generated member ids (``Transcript.alias`` names them by order of appearance).

Both runs use the same group ids, the same topic (so the same topic ids) and the same
client-chosen member ids (KIP-1082), so most responses are comparable byte for byte.
"""
from __future__ import annotations

import dataclasses
import enum
import uuid
from datetime import timedelta
from typing import Any

from support.raw_client import call_with, request_types
from support.wait import wait_until

# kcoord's `--config` for "Kafka-equivalent mode": Kafka's fixed heartbeat interval and its
# 1000 ms assignment interval (KIP-1263), and the bounds of the kafka44 fixture
# (support.kafka_broker.SETTINGS). The heartbeat interval is 1000 ms on both sides: Kafka gets
# it per group (``consumer.heartbeat.interval.ms``, set_kafka_group_config) so real clients
# reconcile in about a second instead of five; Kafka's session timeout default (45 s) stays.
HEARTBEAT_MS = 1000
KAFKA_EQUIVALENT = (
    "consumer_heartbeat_policy=fixed",
    f"consumer_heartbeat_interval_ms={HEARTBEAT_MS}",
    "consumer_assignment_interval_ms=1000",
    "consumer_session_timeout_ms=45000",
    "consumer_min_session_timeout_ms=6000",
    "consumer_min_heartbeat_interval_ms=500",
    "streams_min_session_timeout_ms=6000",        # the broker's lowered streams floors (kafka_broker.SETTINGS)
    "streams_min_heartbeat_interval_ms=500",
    "streams_assignment_interval_ms=1000",
    "group_min_session_timeout_ms=1000",
    "group_initial_rebalance_delay_ms=0",
)

# API keys used by the scenarios.
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT = 8, 9, 10, 11, 12
LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 13, 14, 15, 16, 42
INCREMENTAL_ALTER_CONFIGS, OFFSET_DELETE, CG_HEARTBEAT, CG_DESCRIBE = 44, 47, 68, 69
DESCRIBE_CONFIGS = 32
GROUP_RESOURCE = 32     # ConfigResource.Type.GROUP (KIP-848 group configs)

DROPPED = frozenset({"throttle_time", "client_host", "node_id", "host", "port"})


@dataclasses.dataclass(frozen=True)
class Coordinator:
    """One side of a differential run: a name ("kafka" or "kcoord") and the address group
    requests go to (Kafka's one node, or kcoord's bootstrap listener)."""
    name: str
    address: str

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        return call_with(self.address, api_key, version, **fields)

    def types(self, api_key: int, version: int):
        return request_types(api_key, version)


def plain(value: Any, drop: frozenset[str] = DROPPED, field: str = "") -> Any:
    """kio data as plain Python: dataclasses → dicts without ``drop``ped fields, enums → names,
    UUIDs → str, timedeltas → ms, tuples → lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), drop, f.name)
                for f in dataclasses.fields(value) if f.name not in drop}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, str) and value and field == "error_message":
        return "<message>"      # free text: compared for presence only (docs/design/differential.md)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, (tuple, list)):
        return [plain(v, drop) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def sorted_assignment(topic_partitions: Any) -> dict[str, list[int]]:
    """{topic id: sorted partitions} of a ConsumerGroupHeartbeat / Describe assignment."""
    return {str(tp.topic_id): sorted(tp.partitions) for tp in topic_partitions or () if tp.partitions}


def partition_count(topic_partitions: Any) -> int:
    return sum(len(tp.partitions) for tp in topic_partitions or ())


class Transcript(dict):
    """Named steps of one run, in order, with server-generated ids replaced by aliases."""

    def __init__(self, side: Coordinator) -> None:
        super().__init__()
        self.side = side
        self._aliases: dict[str, str] = {}

    def alias(self, member_id: str) -> str:
        """A stable name for a server-generated member id ("member-1", ...); '' stays ''."""
        if not member_id:
            return member_id
        return self._aliases.setdefault(member_id, f"member-{len(self._aliases) + 1}")

    def add(self, step: str, value: Any) -> Any:
        assert step not in self, f"step {step!r} recorded twice"
        self[step] = value
        return value


def differences(kafka: Any, kcoord: Any, path: str = "") -> list[str]:
    """Every path where the two plain values differ, as "path: kafka=… kcoord=…"."""
    if isinstance(kafka, dict) and isinstance(kcoord, dict):
        out = []
        for key in list(kafka) + [k for k in kcoord if k not in kafka]:
            out += differences(kafka.get(key, "<absent>"), kcoord.get(key, "<absent>"), f"{path}.{key}")
        return out
    if isinstance(kafka, list) and isinstance(kcoord, list) and len(kafka) == len(kcoord):
        return [d for i, (a, b) in enumerate(zip(kafka, kcoord)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if kafka == kcoord else [f"{path or '.'}: kafka={kafka!r} kcoord={kcoord!r}"]


def assert_same(kafka: dict, kcoord: dict) -> None:
    diff = differences(dict(kafka), dict(kcoord))
    assert not diff, "kcoord differs from Kafka 4.4:\n  " + "\n  ".join(diff)


def wait_for_coordinator(side: Coordinator, group: str, timeout: float = 20.0) -> None:
    """FindCoordinator(group) answers NONE: Kafka creates __consumer_offsets on first use."""
    def found() -> bool:
        response = side.call(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(group,))
        return all(int(c.error_code) == 0 for c in response.coordinators)

    wait_until(found, timeout, 0.2, f"{side.name}: a coordinator for {group}")


def set_kafka_group_config(side: Coordinator, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs on a GROUP resource (KIP-848 per-group settings) sent to ``side``:
    Kafka keeps it in its metadata, kcoord in its state topic (docs/user/group-configs.md)."""
    t = side.types(INCREMENTAL_ALTER_CONFIGS, 1)
    resource = t.AlterConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group, configs=tuple(
        t.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()))
    response = side.call(INCREMENTAL_ALTER_CONFIGS, 1, resources=(resource,), validate_only=False)
    errors = [(r.resource_name, r.error_code, r.error_message) for r in response.responses if int(r.error_code)]
    assert not errors, f"group config {configs} refused: {errors}"
    # Kafka answers the alter once the controller has the record; its brokers apply it when
    # their metadata image catches up, and a heartbeat before that still gets the default
    # (seen under CI load: heartbeat_interval 5000 after setting 1000). Wait until the broker
    # describes the new values, within a bound.
    wait_until(lambda: describe_kafka_group_config(side, group, tuple(configs)) == configs, 15,
               message=f"Kafka's broker applies group config {configs} for {group}")


def describe_kafka_group_config(side: Coordinator, group: str, keys: tuple[str, ...]) -> dict[str, str | None]:
    """DescribeConfigs (v4) of ``keys`` on a GROUP resource, as the broker ``side`` sees them."""
    t = side.types(DESCRIBE_CONFIGS, 4)
    resource = t.DescribeConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group, configuration_keys=keys)
    response = side.call(DESCRIBE_CONFIGS, 4, resources=(resource,))
    return {c.name: c.value for r in response.results for c in r.configs if c.name in keys}


def wait_knows_topic(side: Coordinator, topic: str, partitions: int, timeout: float = 15.0) -> None:
    """A group coordinator learns of a new topic a moment after CreateTopics returns (Kafka from
    its metadata image, kcoord from its next upstream Metadata refresh); a member joining before
    that gets an empty assignment and one more epoch later. A probe member heartbeats until it
    is assigned the topic, then leaves."""
    probe = RawMember(side, f"probe-{topic}", member_ids(1)[0], topics=(topic,))
    wait_for_coordinator(side, probe.group)
    probe.heartbeat_until(lambda r: probe.owned_count() == partitions, timeout,
                          f"the probe on {side.name} assigned the new topic")
    probe.leave()


def create_known_topic(sides: Coordinator | tuple[Coordinator, ...], name: str, partitions: int) -> str:
    """Create a topic on the first side (Kafka: both sides see it, with one topic id) and wait
    until every side's group coordinator knows it."""
    from support.admin import create_topic

    sides = sides if isinstance(sides, tuple) else (sides,)
    create_topic(sides[0].address, name, partitions)
    for side in sides:
        wait_knows_topic(side, name, partitions)
    return name


def prepare_group(side: Coordinator, group: str) -> None:
    """The group's coordinator is up and, on Kafka, the heartbeat interval is KAFKA_EQUIVALENT's."""
    wait_for_coordinator(side, group)
    if side.name == "kafka":
        set_kafka_group_config(side, group, {"consumer.heartbeat.interval.ms": str(HEARTBEAT_MS)})


# --- KIP-848 members driven by hand (ConsumerGroupHeartbeat v1, client-chosen member ids) ---

def member_ids(n: int) -> list[str]:
    """KIP-1082 member ids, chosen by the client: the same ones go to both sides."""
    return [f"diff-{uuid.uuid4().hex[:12]}-{i}" for i in range(n)]


class RawMember:
    """One consumer-group member speaking ConsumerGroupHeartbeat v1 itself. It always sends
    the full request (subscription and owned partitions), which the protocol allows."""

    def __init__(self, side: Coordinator, group: str, member_id: str, *, topics: tuple[str, ...] | None = None,
                 regex: str | None = None, instance_id: str | None = None, rebalance_ms: int = 30_000) -> None:
        self.side, self.group, self.member_id = side, group, member_id
        self.topics, self.regex, self.instance_id, self.rebalance_ms = topics, regex, instance_id, rebalance_ms
        self.epoch = 0
        self.owned: dict[Any, tuple[int, ...]] = {}     # topic id -> partitions

    def heartbeat(self, epoch: int | None = None, owned: dict | None = None) -> Any:
        t = self.side.types(CG_HEARTBEAT, 1)
        owned = self.owned if owned is None else owned
        response = self.side.call(
            CG_HEARTBEAT, 1, group_id=self.group, member_id=self.member_id,
            member_epoch=self.epoch if epoch is None else epoch, instance_id=self.instance_id, rack_id=None,
            rebalance_timeout=timedelta(milliseconds=self.rebalance_ms), subscribed_topic_names=self.topics,
            subscribed_topic_regex=self.regex, server_assignor=None,
            topic_partitions=tuple(t.TopicPartitions(topic_id=k, partitions=v) for k, v in owned.items()))
        if int(response.error_code) == 0 and epoch is None:
            self.epoch = response.member_epoch
            if response.assignment is not None:       # reconcile at once: own what was given
                self.owned = {tp.topic_id: tuple(tp.partitions) for tp in response.assignment.topic_partitions}
        return response

    def heartbeat_until(self, predicate, timeout: float = 15.0, message: str = "condition") -> Any:
        """Heartbeat every 100 ms until ``predicate(response)``; that response. (Kafka computes
        a new target assignment on a heartbeat at least 1 s after the previous one, KIP-1263.)"""
        last: list[Any] = []

        def check() -> Any:
            last[:] = [self.heartbeat()]
            return last[0] if predicate(last[0]) else None

        return wait_until(check, timeout, 0.1, lambda: f"{self.side.name} {self.member_id}: {message} ({last})")

    def owned_count(self) -> int:
        return sum(len(p) for p in self.owned.values())

    def leave(self, epoch: int = -1) -> Any:
        return self.heartbeat(epoch=epoch, owned={})


def describe_consumer_group(side: Coordinator, group: str) -> dict:
    """ConsumerGroupDescribe v1 of one group, plain, members sorted by member id."""
    [described] = side.call(CG_DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False).groups
    out = plain(described)
    out["members"] = sorted(out["members"], key=lambda m: m["member_id"])
    for m in out["members"]:
        for key in ("assignment", "target_assignment"):
            m[key] = {tp["topic_name"]: sorted(tp["partitions"]) for tp in m[key]["topic_partitions"]}
    return out


def heartbeat_view(response: Any) -> dict:
    """A heartbeat response, plain, its assignment as {topic id: sorted partitions}."""
    out = plain(response)
    if response.assignment is not None:
        out["assignment"] = sorted_assignment(response.assignment.topic_partitions)
    return out


def wait_assignment_interval(since: float, interval_ms: int = 1000) -> None:
    """Wait until Kafka's assignment interval (KIP-1263, 1000 ms) has passed since ``since``
    (time.monotonic()): Kafka computes a new target at most once per interval, on the first
    heartbeat after it, so a scenario that needs the next change computed at once waits for
    that documented server clock (a bounded wait on the condition, not a bare sleep)."""
    import time

    wait_until(lambda: time.monotonic() >= since + interval_ms / 1000 + 0.05, interval_ms / 1000 + 1, 0.05,
               "the assignment interval to pass")


class Trajectory:
    """The distinct consecutive (member epoch, owned partition count) states of a member: what
    reconciliation looked like, independent of how many heartbeats each state took."""

    def __init__(self, member: RawMember) -> None:
        self.member = member
        self.states: list[tuple[int, int]] = [(member.epoch, member.owned_count())]

    def note(self) -> None:
        state = (self.member.epoch, self.member.owned_count())
        if state != self.states[-1]:
            self.states.append(state)


# --- offsets and admin requests ---

def commit(side: Coordinator, group: str, topic: str, partitions: dict[int, int], *, member_id: str = "",
           epoch: int = -1) -> dict[int, str]:
    """OffsetCommit v9 ({partition: offset}); {partition: error name}."""
    t = side.types(OFFSET_COMMIT, 9)
    response = side.call(OFFSET_COMMIT, 9, group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id,
                         group_instance_id=None, topics=(t.OffsetCommitRequestTopic(name=topic, partitions=tuple(
                             t.OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                            committed_leader_epoch=-1, committed_metadata="m")
                             for p, o in sorted(partitions.items()))),))
    return {p.partition_index: plain(p.error_code) for t_ in response.topics for p in t_.partitions}


def fetch(side: Coordinator, group: str, topic: str | None, *, member_id: str | None = None,
          epoch: int = -1) -> dict:
    """OffsetFetch v9 of one group (all topics when ``topic`` is None), plain."""
    t = side.types(OFFSET_FETCH, 9)
    topics = None if topic is None else (t.OffsetFetchRequestTopics(name=topic, partition_indexes=tuple(range(6))),)
    [answer] = side.call(OFFSET_FETCH, 9, require_stable=True, groups=(t.OffsetFetchRequestGroup(
        group_id=group, member_id=member_id, member_epoch=epoch, topics=topics),)).groups
    out = plain(answer)
    out["topics"] = sorted(out["topics"], key=lambda x: x["name"])
    return out


def offset_delete(side: Coordinator, group: str, topic: str, partitions: range) -> dict:
    t = side.types(OFFSET_DELETE, 0)
    return plain(side.call(OFFSET_DELETE, 0, group_id=group, topics=(t.OffsetDeleteRequestTopic(
        name=topic, partitions=tuple(t.OffsetDeleteRequestPartition(partition_index=p) for p in partitions)),)))


def list_groups(side: Coordinator, groups: set[str], *, states=(), types=()) -> list[dict]:
    """ListGroups v5, only the rows of ``groups`` (Kafka lists every group of the broker)."""
    response = side.call(LIST_GROUPS, 5, states_filter=tuple(states), types_filter=tuple(types))
    assert int(response.error_code) == 0, response
    return sorted((plain(g) for g in response.groups if g.group_id in groups), key=lambda g: g["group_id"])


def describe_groups(side: Coordinator, group: str) -> dict:
    """DescribeGroups v6 of one group, plain, members sorted by member id."""
    [described] = side.call(DESCRIBE_GROUPS, 6, groups=(group,), include_authorized_operations=False).groups
    out = plain(described)
    out["members"] = sorted(out["members"], key=lambda m: m["member_id"])
    return out


def delete_groups(side: Coordinator, group: str) -> str:
    [result] = side.call(DELETE_GROUPS, 2, groups_names=(group,)).results
    return plain(result.error_code)


STREAMS_GROUP_HEARTBEAT = 88


def streams_changelog_topology(side: Coordinator, app: str, source: str) -> Any:
    """A raw streams member's topology (StreamsGroupHeartbeat v1): subtopology 0 reads
    ``source`` and writes the repartition topic; subtopology 1 reads it and keeps a store with
    a changelog. The coordinator creates both internal topics."""
    t = side.types(STREAMS_GROUP_HEARTBEAT, 1)

    def info(name: str) -> Any:
        return t.TopicInfo(name=name, partitions=0, replication_factor=0, topic_configs=())
    return t.Topology(epoch=1, subtopologies=(
        t.Subtopology(subtopology_id="0", source_topics=(source,), source_topic_regex=(), state_changelog_topics=(),
                      repartition_sink_topics=(f"{app}-repartition",), repartition_source_topics=(),
                      copartition_groups=()),
        t.Subtopology(subtopology_id="1", source_topics=(), source_topic_regex=(),
                      state_changelog_topics=(info(f"{app}-store-changelog"),), repartition_sink_topics=(),
                      repartition_source_topics=(info(f"{app}-repartition"),), copartition_groups=())))
