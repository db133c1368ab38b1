"""Streams groups (KIP-1071) in `kcoord groups`: a StreamsGroupDescribe answer as a
GroupDescription, and the rows `describe --members` shows for it.

Rules, as Kafka 4.4's `kafka-streams-groups.sh` reads a streams group:
- a task is (subtopology, partition); the topic partitions a task reads are that partition of
  each source topic and each repartition source topic of its subtopology, so a member
  "owns" those partitions in the offsets view (`Member.assignment`);
- the group's internal topics are its topology's repartition source topics and state
  changelog topics (those the coordinator created for it);
- the tasks are shown as `SUBTOPOLOGY:P,P;SUBTOPOLOGY:P` per kind: active, standby, warmup,
  current and target.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TASK_KINDS = ("active", "standby", "warmup")
Tasks = dict[str, dict[str, list[int]]]      # kind -> subtopology id -> partitions


@dataclass
class Subtopology:
    subtopology_id: str
    source_topics: list[str]
    repartition_source_topics: list[str]
    changelog_topics: list[str]


@dataclass
class StreamsTopology:
    epoch: int
    subtopologies: list[Subtopology] = field(default_factory=list)

    def input_partitions(self, tasks: dict[str, list[int]]) -> dict[str, list[int]]:
        """{topic: partitions} the given active tasks read."""
        out: dict[str, set[int]] = {}
        for s in self.subtopologies:
            for topic in (*s.source_topics, *s.repartition_source_topics):
                out.setdefault(topic, set()).update(tasks.get(s.subtopology_id, ()))
        return {t: sorted(ps) for t, ps in sorted(out.items()) if ps}

    def source_topics(self) -> list[str]:
        return sorted({t for s in self.subtopologies for t in s.source_topics})

    def internal_topics(self) -> list[str]:
        return sorted({t for s in self.subtopologies for t in (*s.repartition_source_topics, *s.changelog_topics)})


@dataclass
class StreamsMemberInfo:
    process_id: str
    topology_epoch: int
    endpoint: str | None
    tasks: Tasks
    target: Tasks


def _tasks(assignment: Any) -> Tasks:
    return {kind: {t.subtopology_id: sorted(int(p) for p in t.partitions)
                   for t in sorted(getattr(assignment, f"{kind}_tasks"), key=lambda t: t.subtopology_id)}
            for kind in TASK_KINDS}


def topology_of(described: Any) -> StreamsTopology | None:
    top = described.topology
    if top is None:
        return None
    return StreamsTopology(int(top.epoch), [
        Subtopology(s.subtopology_id, sorted(s.source_topics), sorted(t.name for t in s.repartition_source_topics),
                    sorted(t.name for t in s.state_changelog_topics))
        for s in sorted(top.subtopologies, key=lambda s: s.subtopology_id)])


def member_info(m: Any) -> StreamsMemberInfo:
    endpoint = None if m.user_endpoint is None else f"{m.user_endpoint.host}:{m.user_endpoint.port}"
    return StreamsMemberInfo(m.process_id, int(m.topology_epoch), endpoint, _tasks(m.assignment),
                             _tasks(m.target_assignment))


def tasks_text(tasks: dict[str, list[int]]) -> str:
    return ";".join(f"{s}:{','.join(map(str, ps))}" for s, ps in tasks.items()) or "-"


def member_row(group: str, m: Any) -> dict[str, Any]:
    """One streams member: its process, endpoint and tasks (`m` a groups_admin.Member)."""
    info: StreamsMemberInfo = m.streams
    row: dict[str, Any] = {"group": group, "member_id": m.member_id, "process_id": info.process_id,
                           "client_id": m.client_id, "host": m.host, "member_epoch": m.member_epoch,
                           "topology_epoch": info.topology_epoch, "endpoint": info.endpoint}
    for kind in TASK_KINDS:
        row[kind] = tasks_text(info.tasks[kind])
    for kind in TASK_KINDS:
        row[f"target_{kind}"] = tasks_text(info.target[kind])
    return row


MEMBER_HEADER = ["GROUP", "MEMBER-ID", "PROCESS", "CLIENT-ID", "HOST", "MEMBER-EPOCH", "TOPOLOGY-EPOCH", "ENDPOINT",
                 "ACTIVE", "STANDBY", "WARMUP", "TARGET-ACTIVE", "TARGET-STANDBY", "TARGET-WARMUP"]
MEMBER_KEYS = ["group", "member_id", "process_id", "client_id", "host", "member_epoch", "topology_epoch", "endpoint",
               *TASK_KINDS, *(f"target_{k}" for k in TASK_KINDS)]
