"""Streams groups (KIP-1071), scripted with raw StreamsGroupHeartbeat / StreamsGroupDescribe
requests, on Kafka 4.4's own streams coordinator and on kcoord in front of Kafka 4.4 and in front
of Tansu (which has no streams groups at all): every response must be the same, field by field
(support.differential), the error messages word for word.

Each side runs its own application id (the internal topics are named after it, and the first
side to create them would change what the next one sees); the transcripts name it "<app>". The
scenario: a member joins with a topology that has a repartition topic and a changelog, which the
coordinator creates (Kafka itself; kcoord through its own link), heartbeats until its tasks
are assigned and the statuses are clear, is described (v0 and v1); a member of another group
joins within the initial rebalance delay (ASSIGNMENT_DELAYED); then the refusals: another
topology (INVALID_REQUEST), a Kafka internal topic and an invalid name (STREAMS_INVALID_TOPOLOGY),
a StreamsGroupHeartbeat to a consumer group (GROUP_ID_NOT_FOUND), API 93 without a plugin
(UNSUPPORTED_VERSION); the offsets of streams members (offsets_across_rebalances: OffsetCommit
v8-v10, TxnOffsetCommit and OffsetFetch at the member's epoch, newer and older ones, across a
second and a third member's joins, KIP-1251's per-task assignment epochs); then the members leave.
Then MISSING_CLIENT_TAGS, and the assignment configs' change (a rebalance at the next heartbeat)
with the tag lists Kafka refuses.
"""
from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from coordinator.group.streams.topology import summarize
from support.admin import create_topic
from support.differential import (
    Coordinator,
    RawMember,
    Transcript,
    assert_same,
    commit,
    delete_groups,
    describe_groups,
    fetch,
    list_groups,
    member_ids,
    plain,
    set_kafka_group_config,
    wait_for_coordinator,
    wait_knows_topic,
)
from support.raw_transactions import RawProducer, txn_commit
from support.wait import wait_until

pytestmark = pytest.mark.integration

HEARTBEAT, DESCRIBE, TOPOLOGY_UPDATE, DESCRIBE_GROUPS = 88, 89, 93, 15
OFFSET_COMMIT, OFFSET_FETCH, METADATA = 8, 9, 3
INPUT_PARTITIONS = 4
MISSING_INTERNAL_TOPICS = 3
# tasks of the topology below, unsorted, with the sentinels a Streams client may send
REPORTED = [("1", 3, 2**63 - 1), ("0", 2, 17), ("1", 0, -1), ("0", 0, 5)]


@pytest.fixture(scope="module")
def input_topic(kafka44, tansu) -> str:
    """One input topic, on Kafka (seen by Kafka and by kcoord in front of it) and on Tansu."""
    name = f"streams-input-{uuid.uuid4().hex[:8]}"
    create_topic(kafka44.bootstrap, name, INPUT_PARTITIONS)
    create_topic(tansu.bootstrap, name, INPUT_PARTITIONS)
    return name


@pytest.fixture(scope="module")
def three_sides(kafka44, kcoord44, kcoord_tansu, input_topic) -> tuple[Coordinator, ...]:
    sides = (Coordinator("kafka", kafka44.bootstrap), Coordinator("kcoord", kcoord44.bootstrap),
             Coordinator("kcoord-tansu", kcoord_tansu.bootstrap))
    for side in sides:
        wait_knows_topic(side, input_topic, INPUT_PARTITIONS)
    return sides


# ---------------------------------------------------------------- raw streams members
def topology(side: Coordinator, app: str, source: str, *, epoch: int = 1, extra_source: str | None = None):
    """A count with a repartition: subtopology 0 reads ``source`` and writes the repartition
    topic, subtopology 1 reads it and keeps a store with a changelog."""
    t = side.types(HEARTBEAT, 1)

    def info(name: str, partitions: int = 0):
        return t.TopicInfo(name=name, partitions=partitions, replication_factor=0, topic_configs=())
    sources = (source,) if extra_source is None else (source, extra_source)
    return t.Topology(epoch=epoch, subtopologies=(
        t.Subtopology(subtopology_id="0", source_topics=sources, source_topic_regex=(), state_changelog_topics=(),
                      repartition_sink_topics=(f"{app}-repartition",), repartition_source_topics=(),
                      copartition_groups=()),
        t.Subtopology(subtopology_id="1", source_topics=(), source_topic_regex=(),
                      state_changelog_topics=(info(f"{app}-store-changelog"),), repartition_sink_topics=(),
                      repartition_source_topics=(info(f"{app}-repartition"),), copartition_groups=())))


class StreamsMember:
    """One streams member speaking StreamsGroupHeartbeat v1 itself; it owns at once what it
    is given (a real member would first revoke; one member alone never has to)."""

    def __init__(self, side: Coordinator, group: str, member_id: str, process_id: str) -> None:
        self.side, self.group, self.member_id, self.process_id = side, group, member_id, process_id
        self.epoch = 0
        self.tasks: dict[str, tuple] = {"active": (), "standby": (), "warmup": ()}

    def join(self, top, version: int = 1, instance_id: str | None = None, tags: dict[str, str] | None = None) -> Any:
        kv = self.side.types(HEARTBEAT, version).KeyValue
        return self.side.call(
            HEARTBEAT, version, group_id=self.group, member_id=self.member_id, member_epoch=0,
            endpoint_information_epoch=0, instance_id=instance_id, rack_id=None,
            rebalance_timeout=timedelta(seconds=30), topology=top, active_tasks=(), standby_tasks=(),
            warmup_tasks=(), process_id=self.process_id, user_endpoint=None,
            client_tags=tuple(kv(key=k, value=v) for k, v in (tags or {}).items()), task_offsets=None,
            task_end_offsets=None, shutdown_application=False)

    def heartbeat(self, epoch: int | None = None, instance_id: str | None = None, offsets: list | None = None,
                  ends: list | None = None) -> Any:
        """``offsets``, ``ends``: TaskOffsets / TaskEndOffsets as (subtopology, partition, offset),
        or None (the field sent null)."""
        t = self.side.types(HEARTBEAT, 1)

        def ids(kind: str):
            return tuple(t.TaskIds(subtopology_id=s, partitions=p) for s, p in self.tasks[kind])

        def reported(entries: list | None):
            return None if entries is None else tuple(t.TaskOffset(subtopology_id=s, partition=p, offset=o)
                                                      for s, p, o in entries)
        response = self.side.call(
            HEARTBEAT, 1, group_id=self.group, member_id=self.member_id,
            member_epoch=self.epoch if epoch is None else epoch, endpoint_information_epoch=0, instance_id=instance_id,
            rack_id=None, rebalance_timeout=timedelta(milliseconds=-1), topology=None,
            active_tasks=ids("active"), standby_tasks=ids("standby"), warmup_tasks=ids("warmup"),
            process_id=None, user_endpoint=None, client_tags=None, task_offsets=reported(offsets),
            task_end_offsets=reported(ends), shutdown_application=False)
        self.note(response)
        return response

    def note(self, response: Any) -> None:
        if int(response.error_code) != 0:
            return
        self.epoch = response.member_epoch
        if response.active_tasks is not None:
            self.tasks = {kind: tuple((i.subtopology_id, tuple(sorted(i.partitions)))
                                      for i in getattr(response, f"{kind}_tasks"))
                          for kind in ("active", "standby", "warmup")}

    def active_count(self) -> int:
        return sum(len(p) for _, p in self.tasks["active"])


def view(response: Any, app: str) -> Any:
    """A response, plain, the application id as "<app>", error messages word for word."""
    out = plain(response, frozenset({"throttle_time", "client_host", "host", "port"}))
    if getattr(response, "error_message", None) is not None:
        out["error_message"] = response.error_message
    for kind in ("active_tasks", "standby_tasks", "warmup_tasks"):
        if isinstance(out.get(kind), list):
            out[kind] = sorted((t["subtopology_id"], sorted(t["partitions"])) for t in out[kind])
    return named(out, app)


def named(value: Any, app: str) -> Any:
    if isinstance(value, str):
        return value.replace(app, "<app>")
    if isinstance(value, dict):
        return {k: named(v, app) for k, v in value.items()}
    if isinstance(value, list):
        return [named(v, app) for v in value]
    return value


def describe(side: Coordinator, app: str, version: int, *groups: str, operations: bool = False) -> Any:
    fields: dict[str, Any] = {"group_ids": groups or (app,), "include_authorized_operations": operations}
    if version >= 1:
        fields["include_topology_description"] = False
    out = view(side.call(DESCRIBE, version, **fields), app)
    for g in out["groups"]:
        g["members"] = sorted(g["members"], key=lambda m: m["member_id"])
        for m in g["members"]:
            for key in ("assignment", "target_assignment"):
                if m.get(key):
                    m[key] = {kind: sorted((t["subtopology_id"], sorted(t["partitions"])) for t in m[key][kind])
                              for kind in ("active_tasks", "standby_tasks", "warmup_tasks")}
    return out


# ---------------------------------------------------------------- the scenario
def app_name(suffix: str, side: str) -> str:
    """The side's application id. Kafka lists the missing internal topics in its HashMap's
    order, which depends on the names: each kcoord side's id is picked so that its two topics
    fall in the order Kafka's id gives its own (under kcoord's rule, topology.summarize), so the
    transcripts compare word for word and Kafka's actual order checks kcoord's rule."""
    kafka = f"diff-streams-{suffix}-kafka"
    if side == "kafka":
        return kafka

    def repartition_first(app: str) -> bool:
        return summarize([f"{app}-repartition", f"{app}-store-changelog"]).startswith(f"{app}-repartition")
    return next(app for i in range(1000) if repartition_first(app := f"diff-streams-{suffix}-{side}{i}")
                == repartition_first(kafka))


def undelayed(side: Coordinator, app: str, configs: dict[str, str] | None = None) -> None:
    """The group's coordinator found, and the group set with no initial rebalance delay and no
    assignment interval (and ``configs``): Kafka's defaults (3 s, 1 s) would only slow the run,
    and a join inside the interval is answered ASSIGNMENT_DELAYED, by the clock."""
    wait_for_coordinator(side, app)
    set_kafka_group_config(side, app, {"streams.initial.rebalance.delay.ms": "0", "streams.assignment.interval.ms": "0",
                                       **(configs or {})})


def join_describe_refuse_leave(t: Transcript, source: str, ids: list[str], suffix: str) -> Transcript:
    side = t.side
    app = app_name(suffix, side.name)
    undelayed(side, app)
    member = StreamsMember(side, app, ids[0], ids[1])
    joined = member.join(topology(side, app, source))
    member.note(joined)
    t.add("join", view(joined, app))

    last: list[Any] = [joined]

    def steady() -> Any:
        r = last[0] = member.heartbeat()
        return r if not r.status and member.active_count() == 8 and r.active_tasks is None else None
    settled = wait_until(steady, 60, 0.2, lambda: f"{side.name}: the member runs its 8 tasks with no status "
                         f"(joined: {joined}; last: {last[0]})")
    t.add("settled", view(settled, app))
    t.add("describe v1", describe(side, app, 1))
    t.add("describe v0", describe(side, app, 0))
    # Kafka 4.4 keeps a member's last TaskOffsets / TaskEndOffsets (each side replaced when sent,
    # kept when null) and its describe shows them sorted, the values as sent
    t.add("task offsets reported", view(member.heartbeat(offsets=REPORTED, ends=[("1", 0, 40)]), app))
    t.add("describe with task offsets", describe(side, app, 1))
    t.add("a duplicate task offset", view(member.heartbeat(offsets=[("0", 1, 1), ("0", 1, 2)]), app))
    t.add("end offsets only", view(member.heartbeat(ends=[]), app))
    t.add("describe after end offsets only", describe(side, app, 1))
    t.add("authorized operations", describe(side, app, 1, operations=True)["groups"][0]["authorized_operations"])
    t.add("commit at the member's epoch", commit(side, app, source, {0: 5, 1: 7}, member_id=ids[0],
                                                 epoch=member.epoch))
    t.add("commit at a future epoch", commit(side, app, source, {0: 6}, member_id=ids[0], epoch=member.epoch + 5))
    t.add("fetch at the member's epoch", named(fetch(side, app, source, member_id=ids[0], epoch=member.epoch), app))
    t.add("fetch at another epoch", named(fetch(side, app, source, member_id=ids[0], epoch=member.epoch - 1), app))
    t.add("list streams groups", named(list_groups(side, {app}, types=("streams",)), app))
    t.add("list consumer groups", named(list_groups(side, {app}, types=("consumer",)), app))
    described = describe_groups(side, app)
    described["error_message"] = side.call(DESCRIBE_GROUPS, 6, groups=(app,),
                                           include_authorized_operations=False).groups[0].error_message
    t.add("DescribeGroups v6", named(described, app))
    t.add("DescribeGroups v5", named(describe_groups_v5(side, app), app))
    t.add("delete while running", delete_groups(side, app))
    delayed = StreamsMember(side, f"{app}-delayed", ids[6], ids[1])      # the default 3 s initial delay
    wait_for_coordinator(side, delayed.group)
    t.add("join within the initial rebalance delay", view(delayed.join(topology(side, app, source)), app))
    other = StreamsMember(side, app, ids[2], ids[3])
    t.add("another topology", view(other.join(topology(side, app, source, extra_source=f"{app}-other")), app))
    t.add("internal topic", view(other.join(topology(side, app, "__consumer_offsets")), app))
    t.add("invalid name", view(other.join(topology(side, app, "no spaces allowed")), app))
    consumers = f"{app}-consumers"
    wait_for_coordinator(side, consumers)
    assert int(RawMember(side, consumers, ids[4], topics=(source,)).heartbeat().error_code) == 0
    t.add("heartbeat to a consumer group", view(StreamsMember(side, consumers, ids[5], ids[1]).join(
        topology(side, consumers, source)), app))
    t.add("unknown group describe", describe(side, app, 1, f"{app}-none"))
    u = side.types(TOPOLOGY_UPDATE, 0)
    t.add("topology description update", view(side.call(
        TOPOLOGY_UPDATE, 0, group_id=app, member_id=ids[0], topology_epoch=1,
        topology_description=u.TopologyDescription(subtopologies=(), global_stores=())), app))
    joiners = offsets_across_rebalances(t, source, app, member, ids)
    t.add("leave", view(member.heartbeat(epoch=-1), app))
    for joiner in joiners:
        assert int(joiner.heartbeat(epoch=-1).error_code) == 0
    t.add("admin commit once empty", commit_as(side, app, 9, {source: {0: 9}}))
    t.add("describe after leave", describe(side, app, 1))
    t.add("delete when empty", delete_groups(side, app))
    t.add("describe after delete", describe(side, app, 1))
    return t


# ---------------------------------------------------------------- offsets of streams members
def topic_ids(side: Coordinator, *names: str) -> dict[str, Any]:
    m = side.types(METADATA, 12)
    response = side.call(METADATA, 12, topics=tuple(m.MetadataRequestTopic(name=n, topic_id=uuid.UUID(int=0))
                                                     for n in names),
                         allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return {x.name: x.topic_id for x in response.topics}


def commit_as(side: Coordinator, app: str, version: int, offsets: dict[str, dict[int, int]], *,
              member_id: str = "", epoch: int = -1, ids: dict[str, Any] | None = None) -> dict[str, dict[int, str]]:
    """OffsetCommit at ``version`` ({topic name: {partition: offset}}; v10 names topics by id,
    from ``ids``); the answer {topic (app as "<app>"): {partition: error}}."""
    t = side.types(OFFSET_COMMIT, version)
    by_name = {v: k for k, v in (ids or {}).items()}
    topics = tuple(t.OffsetCommitRequestTopic(**({"topic_id": (ids or {})[name]} if version >= 10 else {"name": name}),
                                              partitions=tuple(t.OffsetCommitRequestPartition(
                                                  partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                                  committed_metadata="m") for p, o in sorted(parts.items())))
                   for name, parts in offsets.items())
    response = side.call(OFFSET_COMMIT, version, group_id=app, generation_id_or_member_epoch=epoch,
                         member_id=member_id, group_instance_id=None, topics=topics)
    return {named(by_name[x.topic_id] if version >= 10 else x.name, app):
            {q.partition_index: plain(q.error_code) for q in x.partitions} for x in response.topics}


def task_offsets(tasks: Any, source: str, app: str, offset: int) -> dict[str, dict[int, int]]:
    """The offsets a member commits for its tasks ``(subtopology, partition)``: subtopology 0
    reads ``source``, subtopology 1 the repartition topic."""
    out: dict[str, dict[int, int]] = {}
    for sub, p in tasks:
        out.setdefault(source if sub == "0" else f"{app}-repartition", {})[p] = offset
    return out


def codes(answer: dict[str, dict[int, str]]) -> list[str]:
    """The distinct per-partition errors, for tasks compared by role (which tasks move is
    the assignor's choice, compared elsewhere by balance)."""
    return sorted({c for parts in answer.values() for c in parts.values()})


def active(member: StreamsMember) -> set[tuple[str, int]]:
    return {(s, p) for s, ps in member.tasks["active"] for p in ps}


def offsets_across_rebalances(t: Transcript, source: str, app: str, a: StreamsMember,
                              ids: list[str]) -> list[StreamsMember]:
    """OffsetCommit / OffsetFetch of streams members (KIP-1071 with KIP-1251's assignment
    epochs per task): the versions, the member epochs, then a kept, a moved and a task pending
    revocation after B and then C join the group A ran alone. Returns B and C, still members."""
    side = t.side
    first = a.epoch
    both = {source: {0: 3}, f"{app}-repartition": {0: 3}}
    ids_of = topic_ids(side, source, f"{app}-repartition")
    t.add("v8 from a streams member", commit_as(side, app, 8, both, member_id=a.member_id, epoch=first))
    t.add("v8 from an unknown member", commit_as(side, app, 8, both, member_id=ids[7], epoch=first))
    t.add("v9 from an unknown member", commit_as(side, app, 9, both, member_id=ids[7], epoch=first))
    t.add("v9 admin while members", commit_as(side, app, 9, both))
    t.add("v9 at an older epoch", commit_as(side, app, 9, both, member_id=a.member_id, epoch=first - 1))
    t.add("v9 at a newer epoch", commit_as(side, app, 9, both, member_id=a.member_id, epoch=first + 1))
    t.add("v9 to a topic outside the topology at an older epoch",
          commit_as(side, app, 9, {f"{app}-store-changelog": {0: 3}}, member_id=a.member_id, epoch=first - 1))
    t.add("v10 at the member epoch", commit_as(side, app, 10, both, member_id=a.member_id, epoch=first, ids=ids_of))
    t.add("v10 at an older epoch", commit_as(side, app, 10, both, member_id=a.member_id, epoch=first - 1,
                                             ids=ids_of))
    t.add("fetch without member", named(fetch(side, app, source), app))

    # B joins: A gives up half of its tasks, then both run at B's epoch.
    b = StreamsMember(side, app, ids[7], ids[8])
    b.note(b.join(topology(side, app, source)))

    def halves() -> bool:
        a.heartbeat()
        b.heartbeat()
        return a.active_count() == b.active_count() == 4 and a.epoch == b.epoch
    wait_until(halves, 60, 0.1, lambda: f"{side.name}: A and B run 4 tasks each ({a.tasks}, {b.tasks})")
    second = a.epoch
    kept, moved = sorted(active(a)), sorted(active(b))
    t.add("epochs after B joined", [first < second])
    t.add("A, a kept task at its previous epoch",
          codes(commit_as(side, app, 9, task_offsets(kept[:1], source, app, 20), member_id=a.member_id, epoch=first)))
    t.add("A, a moved task at its previous epoch",
          codes(commit_as(side, app, 9, task_offsets(moved[:1], source, app, 20), member_id=a.member_id, epoch=first)))
    t.add("A, v10, kept and moved tasks at its previous epoch", {
        "kept": codes(commit_as(side, app, 10, task_offsets(kept, source, app, 21), member_id=a.member_id,
                                epoch=first, ids=ids_of)),
        "moved": codes(commit_as(side, app, 10, task_offsets(moved, source, app, 21), member_id=a.member_id,
                                 epoch=first, ids=ids_of))})
    t.add("B at the previous epoch",
          codes(commit_as(side, app, 9, task_offsets(moved, source, app, 22), member_id=b.member_id, epoch=first)))
    t.add("B at its epoch",
          codes(commit_as(side, app, 9, task_offsets(moved, source, app, 23), member_id=b.member_id, epoch=second)))
    t.add("B, a task of A at its epoch",
          codes(commit_as(side, app, 9, task_offsets(kept, source, app, 23), member_id=b.member_id, epoch=second)))
    if side.name != "kcoord-tansu":      # Kafka's transactions, not Tansu's
        t.add("TxnOffsetCommit of streams members", txn_commits(side, app, source, a, kept, moved, first, ids_of))
    t.add("fetch as A", named(fetch(side, app, source, member_id=a.member_id, epoch=second), app))
    t.add("fetch as A at its previous epoch", named(fetch(side, app, source, member_id=a.member_id, epoch=first), app))
    t.add("fetch as an unknown member", named(fetch(side, app, source, member_id=ids[9], epoch=second), app))

    # C joins: A is told to revoke tasks it has held since `first` and, until it reports them
    # revoked, may still commit them at `first` (their assignment epoch, kept in record 22).
    c = StreamsMember(side, app, ids[9], ids[10])
    c.note(c.join(topology(side, app, source)))
    held = active(a)

    def revoking() -> bool:
        r = a.heartbeat()
        return int(r.error_code) == 0 and r.active_tasks is not None and active(a) < held
    wait_until(revoking, 60, 0.1, lambda: f"{side.name}: A is told to revoke ({a.tasks})")
    pending = sorted(held - active(a))
    t.add("A revoking, at its epoch", [a.epoch == second])
    t.add("A, a task pending revocation at its previous epoch",
          codes(commit_as(side, app, 9, task_offsets(pending[:1], source, app, 30), member_id=a.member_id,
                          epoch=first)))
    t.add("A, a task pending revocation at an epoch before it was given",
          codes(commit_as(side, app, 9, task_offsets(pending[:1], source, app, 30), member_id=a.member_id,
                          epoch=first - 1)))
    return [b, c]


def txn_commits(side: Coordinator, app: str, source: str, a: StreamsMember, kept: list, moved: list, first: int,
                ids_of: dict[str, Any]) -> dict[str, Any]:
    """TxnOffsetCommit from streams member A inside one transaction (then aborted): Kafka 4.4
    runs the same validator with isTransactional, so any version passes for a member, and a
    commit naming no member at all passes while members run."""
    p = RawProducer(side, f"{app}-txn")
    p.init()
    repartition = f"{app}-repartition"
    aliases = {ids_of[source]: "<source>", ids_of[repartition]: "<repartition>", source: "<source>",
               repartition: "<repartition>"}

    def by(version: int, tasks: list) -> dict:
        offsets = task_offsets(tasks, source, app, 40)
        return offsets if version < 6 else {ids_of[name]: parts for name, parts in offsets.items()}
    answers = {
        "v6 at the member epoch": txn_commit(p, 6, app, by(6, kept), epoch=a.epoch, member=a.member_id,
                                             aliases=aliases),
        "v6 kept tasks at the previous epoch": txn_commit(p, 6, app, by(6, kept), epoch=first, member=a.member_id,
                                                          aliases=aliases),
        "v6 moved tasks at the previous epoch": txn_commit(p, 6, app, by(6, moved), epoch=first,
                                                           member=a.member_id, aliases=aliases),
        "v5 moved tasks at the previous epoch": txn_commit(p, 5, app, by(5, moved), epoch=first,
                                                           member=a.member_id, aliases=aliases),
        "v3 at the member epoch": txn_commit(p, 3, app, by(3, kept[:1]), epoch=a.epoch, member=a.member_id,
                                             aliases=aliases),
        "v6 at a newer epoch": txn_commit(p, 6, app, by(6, kept[:1]), epoch=a.epoch + 1, member=a.member_id,
                                          aliases=aliases),
        "v6 naming no member": txn_commit(p, 6, app, by(6, moved[:1]), aliases=aliases),
        "v6 from an unknown member": txn_commit(p, 6, app, by(6, moved[:1]), epoch=a.epoch, member="nobody",
                                                aliases=aliases),
    }
    out: dict[str, Any] = {step: codes(answer) for step, answer in answers.items()}
    out["abort"] = p.end(committed=False)

    def settled() -> bool:     # the abort markers are written after EndTxn answers
        return all(q["error_code"] != "unstable_offset_commit" for name in (source, repartition)
                   for x in fetch(side, app, name)["topics"] for q in x["partitions"])
    wait_until(settled, 30, 0.1, lambda: f"{side.name}: the aborted offsets settle")
    return out


def describe_groups_v5(side: Coordinator, group: str) -> Any:
    [described] = side.call(DESCRIBE_GROUPS, 5, groups=(group,), include_authorized_operations=False).groups
    return plain(described)


def test_streams_group_raw_requests_answer_as_kafka_44(three_sides, input_topic):
    ids = member_ids(11)
    suffix = uuid.uuid4().hex[:6]
    kafka, *kcoords = (join_describe_refuse_leave(Transcript(side), input_topic, ids, suffix) for side in three_sides)
    # The scenario reached what it is about, on Kafka itself.
    assert kafka["join"]["error_code"] == "none" and kafka["settled"]["member_epoch"] > 0
    # The internal topics were missing at the join, so each coordinator created them.
    assert [s["status_code"] for s in kafka["join"]["status"]] == [MISSING_INTERNAL_TOPICS]
    assert [s["status_code"] for s in kafka["join within the initial rebalance delay"]["status"]] == [5]
    assert kafka["commit at the member's epoch"] == {0: "none", 1: "none"}
    assert kafka["fetch at the member's epoch"]["error_code"] == "none"
    shown = kafka["describe with task offsets"]["groups"][0]["members"][0]
    assert [(o["subtopology_id"], o["partition"], o["offset"]) for o in shown["task_offsets"]] == sorted(REPORTED)
    assert kafka["a duplicate task offset"]["error_code"] == "invalid_request"
    shown = kafka["describe after end offsets only"]["groups"][0]["members"][0]
    assert (len(shown["task_offsets"]), shown["task_end_offsets"]) == (len(REPORTED), [])
    assert kafka["commit at a future epoch"] == {0: "stale_member_epoch"}
    assert kafka["fetch at another epoch"]["error_code"] == "stale_member_epoch"
    assert [g["group_type"] for g in kafka["list streams groups"]] == ["streams"]
    assert kafka["list consumer groups"] == []
    assert kafka["DescribeGroups v6"]["error_code"] == "group_id_not_found"
    assert (kafka["delete while running"], kafka["delete when empty"]) == ("non_empty_group", "none")
    assert kafka["another topology"]["error_code"] == "invalid_request"
    assert kafka["internal topic"]["error_code"] == "streams_invalid_topology"
    assert kafka["heartbeat to a consumer group"]["error_code"] == "group_id_not_found"
    assert kafka["topology description update"]["error_code"] == "unsupported_version"
    assert set(codes(kafka["v8 from a streams member"])) == {"unsupported_version"}
    # The member is looked up before the version is checked; an admin needs an empty group.
    assert codes(kafka["v8 from an unknown member"]) == codes(kafka["v9 admin while members"]) == ["unknown_member_id"]
    assert kafka["A, a task pending revocation at an epoch before it was given"] == ["stale_member_epoch"]
    assert kafka["fetch as A at its previous epoch"]["error_code"] == "stale_member_epoch"
    assert codes(kafka["v10 at the member epoch"]) == ["none"]
    assert codes(kafka["v10 at an older epoch"]) == ["stale_member_epoch"]
    assert kafka["A, a kept task at its previous epoch"] == ["none"]
    assert kafka["A, a moved task at its previous epoch"] == ["stale_member_epoch"]
    assert kafka["A, a task pending revocation at its previous epoch"] == ["none"]
    assert codes(kafka["admin commit once empty"]) == ["none"]
    txn = kafka["TxnOffsetCommit of streams members"]
    assert txn["v3 at the member epoch"] == txn["v6 naming no member"] == ["none"]
    assert txn["v6 moved tasks at the previous epoch"] == ["stale_member_epoch"]
    assert txn["v5 moved tasks at the previous epoch"] == ["illegal_generation"]
    assert_same(kafka, kcoords[0])
    # Tansu's transactions are not compared (see txn_commits).
    assert_same({k: v for k, v in kafka.items() if k != "TxnOffsetCommit of streams members"}, kcoords[1])


def stateless(side: Coordinator, source: str):
    t = side.types(HEARTBEAT, 1)
    return t.Topology(epoch=1, subtopologies=(t.Subtopology(
        subtopology_id="0", source_topics=(source,), source_topic_regex=(), state_changelog_topics=(),
        repartition_sink_topics=(), repartition_source_topics=(), copartition_groups=()),))


def static_leave_and_return(t: Transcript, source: str, ids: list[str], suffix: str) -> Transcript:
    """A static member leaves with -2 and a new member with its instance id takes its place;
    a third one with that instance id is refused while the second is in the group."""
    side = t.side
    app = f"diff-static-{suffix}"
    wait_for_coordinator(side, app)
    set_kafka_group_config(side, app, {"streams.initial.rebalance.delay.ms": "0"})
    first = StreamsMember(side, app, ids[0], ids[3])
    first.note(first.join(stateless(side, source), instance_id="i1"))
    wait_until(lambda: first.heartbeat(instance_id="i1") and first.active_count() == INPUT_PARTITIONS, 30, 0.2,
               f"{side.name}: the static member runs its tasks")
    t.add("describe before", describe(side, app, 1))
    t.add("static leave", view(first.heartbeat(epoch=-2, instance_id="i1"), app))
    t.add("describe while away", describe(side, app, 1))
    second = StreamsMember(side, app, ids[1], ids[3])
    t.add("rejoin with its instance id", view(second.join(stateless(side, source), instance_id="i1"), app))
    t.add("a third with the same instance id",
          view(StreamsMember(side, app, ids[2], ids[4]).join(stateless(side, source), instance_id="i1"), app))
    t.add("describe after", describe(side, app, 1))
    return t


def test_static_membership_answers_as_kafka_44(three_sides, input_topic):
    ids, suffix = member_ids(5), uuid.uuid4().hex[:6]
    kafka, *kcoords = (static_leave_and_return(Transcript(side), input_topic, ids, suffix) for side in three_sides)
    assert kafka["static leave"]["member_epoch"] == -2
    assert kafka["a third with the same instance id"]["error_code"] == "unreleased_instance_id"
    for kcoord in kcoords:
        assert_same(kafka, kcoord)


# ---------------------------------------------------------------- the sticky assignor's standbys
def one_store(side: Coordinator, app: str, source: str):
    """One stateful subtopology: four tasks, each with a changelog (standbys are placed)."""
    t = side.types(HEARTBEAT, 1)
    changelog = t.TopicInfo(name=f"{app}-store-changelog", partitions=0, replication_factor=0, topic_configs=())
    return t.Topology(epoch=1, subtopologies=(t.Subtopology(
        subtopology_id="0", source_topics=(source,), source_topic_regex=(), state_changelog_topics=(changelog,),
        repartition_sink_topics=(), repartition_source_topics=(), copartition_groups=()),))


def targets(side: Coordinator, app: str, members: int) -> Any:
    """The group's epochs and each member's target assignment (StreamsGroupDescribe v1), once
    the target of the group's epoch is computed for all ``members``."""
    def computed() -> Any:
        [g] = describe(side, app, 1)["groups"]
        done = (g["error_code"] == "none" and len(g["members"]) == members
                and g["assignment_epoch"] == g["group_epoch"] and all(m["target_assignment"] for m in g["members"]))
        return g if done else None
    g = wait_until(computed, 30, 0.2, f"{side.name}: a target for {members} members")
    return {"group_epoch": g["group_epoch"], "assignment_epoch": g["assignment_epoch"],
            "targets": {m["member_id"]: m["target_assignment"] for m in g["members"]}}


def reconciled(side: Coordinator, app: str, members: tuple[StreamsMember, ...]) -> None:
    """Heartbeats until every member holds its target (the assignor then starts from those
    assignments, `StreamsGroupMember.assignedTasks()`)."""
    def done() -> bool:
        for m in members:
            m.heartbeat()
        [g] = describe(side, app, 1)["groups"]
        return (len(g["members"]) == len(members) and g["assignment_epoch"] == g["group_epoch"]
                and all(m["assignment"] == m["target_assignment"] for m in g["members"]))
    wait_until(done, 30, 0.2, f"{side.name}: {len(members)} members hold their targets")


def standby_placement(t: Transcript, source: str, ids: list[str], suffix: str) -> Transcript:
    """One standby replica, three members on three processes joining one by one: A alone runs
    the four tasks; B's join moves 2 and 3 to B, and A, their previous active owner, is their
    standby; both reconcile, B reports offsets for its standbys and C joins. Kafka 4.4's
    placement (its StickyTaskAssignor, docs/design/streams-groups.md): 3 goes to C (B keeps one
    task, the active quota); 3's standby to B, its previous active owner; 2's stays on A and
    1's on B, which is then at the total quota (3), so 0's goes to C, not to B its holder."""
    side = t.side
    app = f"diff-standby-{suffix}-{side.name}"
    undelayed(side, app, {"streams.num.standby.replicas": "1"})
    a, b, c = (StreamsMember(side, app, ids[i], ids[3 + i]) for i in range(3))
    a.note(a.join(one_store(side, app, source)))
    wait_until(lambda: a.heartbeat() and a.active_count() == INPUT_PARTITIONS, 60, 0.2,
               f"{side.name}: the first member runs the four tasks")
    t.add("one member", targets(side, app, 1))
    b.note(b.join(one_store(side, app, source)))
    t.add("a second member", targets(side, app, 2))
    reconciled(side, app, (a, b))
    t.add("offsets of its standbys", view(b.heartbeat(offsets=[("0", 0, 1000), ("0", 1, 1000)]), app)["error_code"])
    c.note(c.join(one_store(side, app, source)))
    t.add("a third member", targets(side, app, 3))
    for member in (a, b, c):
        assert int(member.heartbeat(epoch=-1).error_code) == 0
    return t


def test_standby_placement_is_kafka_44s(three_sides, input_topic):
    ids, suffix = member_ids(6), uuid.uuid4().hex[:6]
    kafka, *kcoords = (standby_placement(Transcript(side), input_topic, ids, suffix) for side in three_sides)
    active = {m: t["active_tasks"] for m, t in kafka["a third member"]["targets"].items()}
    standby = {m: t["standby_tasks"] for m, t in kafka["a third member"]["targets"].items()}
    assert active == {ids[0]: [("0", [0, 1])], ids[1]: [("0", [2])], ids[2]: [("0", [3])]}
    assert standby == {ids[0]: [("0", [2])], ids[1]: [("0", [1, 3])], ids[2]: [("0", [0])]}
    for kcoord in kcoords:
        assert_same(kafka, kcoord)


# ---------------------------------------------------------------- the sticky assignor's active order
@pytest.fixture(scope="module")
def second_input(kafka44, tansu, three_sides) -> str:
    """A second input topic of INPUT_PARTITIONS partitions, on Kafka and on Tansu."""
    name = f"streams-input-b-{uuid.uuid4().hex[:8]}"
    create_topic(kafka44.bootstrap, name, INPUT_PARTITIONS)
    create_topic(tansu.bootstrap, name, INPUT_PARTITIONS)
    for side in three_sides:
        wait_knows_topic(side, name, INPUT_PARTITIONS)
    return name


def two_sources(side: Coordinator, first: str, second: str):
    """Two stateless subtopologies reading one input topic each: eight tasks, no internal topic."""
    t = side.types(HEARTBEAT, 1)
    return t.Topology(epoch=1, subtopologies=tuple(t.Subtopology(
        subtopology_id=sid, source_topics=(source,), source_topic_regex=(), state_changelog_topics=(),
        repartition_sink_topics=(), repartition_source_topics=(), copartition_groups=())
        for sid, source in (("0", first), ("1", second))))


def active_order(t: Transcript, first: str, second: str, ids: list[str], suffix: str) -> Transcript:
    """A runs the eight tasks alone; B joins. The active quota is 4: A keeps the first four of
    its tasks in Kafka 4.4's order, by partition then subtopology, and B is given the rest."""
    side = t.side
    app = f"diff-order-{suffix}-{side.name}"
    undelayed(side, app)
    a, b = (StreamsMember(side, app, ids[i], ids[2 + i]) for i in range(2))
    a.note(a.join(two_sources(side, first, second)))
    wait_until(lambda: a.heartbeat() and a.active_count() == 2 * INPUT_PARTITIONS, 60, 0.2,
               f"{side.name}: the first member runs the eight tasks")
    b.note(b.join(two_sources(side, first, second)))
    t.add("a second member", targets(side, app, 2))
    for member in (a, b):
        assert int(member.heartbeat(epoch=-1).error_code) == 0
    return t


def test_the_active_pass_walks_tasks_by_partition_as_kafka_44(three_sides, input_topic, second_input):
    ids, suffix = member_ids(4), uuid.uuid4().hex[:6]
    kafka, *kcoords = (active_order(Transcript(side), input_topic, second_input, ids, suffix) for side in three_sides)
    active = {m: t["active_tasks"] for m, t in kafka["a second member"]["targets"].items()}
    assert active == {ids[0]: [("0", [0, 1]), ("1", [0, 1])], ids[1]: [("0", [2, 3]), ("1", [2, 3])]}
    for kcoord in kcoords:
        assert_same(kafka, kcoord)


# ---------------------------------------------------------------- the group's client-tag keys
def missing_client_tags(t: Transcript, source: str, ids: list[str], suffix: str) -> Transcript:
    """The group's `streams.rack.aware.assignment.tags` is "zone,rack": a v1 member that sends
    only rack is told MISSING_CLIENT_TAGS naming zone, on its join and its next heartbeat; a v0
    member that sends none is not; a v1 member that sends both is not."""
    side = t.side
    app = f"diff-tags-{suffix}-{side.name}"
    undelayed(side, app, {"streams.rack.aware.assignment.tags": "zone,rack"})
    a, b, c = (StreamsMember(side, app, ids[i], ids[3 + i]) for i in range(3))
    joined = a.join(stateless(side, source), tags={"rack": "r1"})
    a.note(joined)
    t.add("v1 join without zone", view(joined, app)["status"])
    t.add("its next heartbeat", view(a.heartbeat(), app)["status"])
    t.add("v0 join without tags", view(b.join(stateless(side, source), version=0), app)["status"])
    t.add("v1 join with both", view(c.join(stateless(side, source), tags={"zone": "z1", "rack": "r2"}), app)["status"])
    for member in (a, b, c):
        member.heartbeat(epoch=-1)
    return t


def test_missing_client_tags_answers_as_kafka_44(three_sides, input_topic):
    ids, suffix = member_ids(6), uuid.uuid4().hex[:6]
    kafka, *kcoords = (missing_client_tags(Transcript(side), input_topic, ids, suffix) for side in three_sides)
    missing = [{"status_code": 6, "status_detail": "Missing required client tags for rack-aware standby "
                "assignment: [zone]. Configure them via 'client.tag.<tagKey>' in your Streams config."}]
    assert kafka["v1 join without zone"] == kafka["its next heartbeat"] == missing
    assert kafka["v0 join without tags"] == kafka["v1 join with both"] == []
    for kcoord in kcoords:
        assert_same(kafka, kcoord)


def alter_refusal(side: Coordinator, app: str, configs: dict[str, str]) -> Any:
    """IncrementalAlterConfigs SET on the group, answered (error code, message)."""
    t = side.types(44, 1)
    resource = t.AlterConfigsResource(resource_type=32, resource_name=app, configs=tuple(
        t.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()))
    answer = side.call(44, 1, resources=(resource,), validate_only=False).responses[0]
    return [int(answer.error_code), answer.error_message]


def assignment_configs_change(t: Transcript, source: str, ids: list[str], suffix: str) -> Transcript:
    """Kafka 4.4's assignment configs (record 17's LastAssignmentConfigs): a change of the
    group's `streams.num.standby.replicas`, then of its `streams.rack.aware.assignment.tags`,
    bumps the member's epoch at its next heartbeat; an unchanged heartbeat does not. Tag lists
    Kafka refuses (an empty key, a repeated one) are refused in its words."""
    side = t.side
    app = f"diff-configs-{suffix}-{side.name}"
    undelayed(side, app)
    a = StreamsMember(side, app, ids[0], ids[1])
    a.note(a.join(stateless(side, source)))
    wait_until(lambda: a.heartbeat() and a.active_count() == INPUT_PARTITIONS, 60, 0.2,
               f"{side.name}: the member runs the four tasks")
    before = a.epoch
    set_kafka_group_config(side, app, {"streams.num.standby.replicas": "1"})
    t.add("epochs gained after a standby change", a.heartbeat().member_epoch - before)
    set_kafka_group_config(side, app, {"streams.rack.aware.assignment.tags": "zone"})
    tagged = a.heartbeat()
    t.add("after a tag-key change", {"epochs gained": tagged.member_epoch - before,
                                     "status": view(tagged, app)["status"]})
    t.add("epochs gained, unchanged", a.heartbeat().member_epoch - before)
    for bad in ("zone,", " , zone", "zone,zone", "zone,,"):
        t.add(f"alter to {bad!r}", alter_refusal(side, app, {"streams.rack.aware.assignment.tags": bad}))
    a.heartbeat(epoch=-1)
    return t


def test_assignment_configs_change_answers_as_kafka_44(three_sides, input_topic):
    ids, suffix = member_ids(2), uuid.uuid4().hex[:6]
    kafka, *kcoords = (assignment_configs_change(Transcript(side), input_topic, ids, suffix) for side in three_sides)
    assert kafka["epochs gained after a standby change"] == 1
    assert kafka["after a tag-key change"]["epochs gained"] == 2
    assert kafka["epochs gained, unchanged"] == 2
    for kcoord in kcoords:
        assert_same(kafka, kcoord)
