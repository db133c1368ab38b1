"""What a replay found, as JSON and in the layout of `kafka-consumer-groups --describe`.

The JSON model is the contract (tests compare it with what a running kcoord answers);
the text is the three `--describe` views of Kafka's tool (`--state --verbose`,
`--members --verbose`, `--offsets --verbose`) over every group, preceded by a
`--list`-style table of group types. A log has no log-end offsets, so LOG-END-OFFSET
and LAG are `-`; COORDINATOR (ID) names the offsets-topic partition holding the group.

kcoord's `connect` groups (docs/design/connect-groups-spec.md) are described as ConnectGroupDescribe
(32706) shows them: group and assignment epochs, the client assignor, and per worker its
epoch, state and units as {connector: tasks}, task -1 being the connector itself (the
`connector:tasks` text of the tables). They own no partitions and commit no offsets.

Streams groups (KIP-1071) are described as StreamsGroupDescribe (89) shows them: group and
target-assignment epochs, the topology (epoch and subtopologies), and per member its epochs,
process, endpoint and tasks as {subtopology id: partitions}: `assignment` holds the active
tasks (the `subtopology:partitions` text of the tables), standby and warm-up tasks beside them.
"""
from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable

from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

from coordinator.group.classic.group import ClassicGroup
from coordinator.group.group_admin import group_state_name, group_type_name, protocol_type_of
from coordinator.group.image import MetadataImage
from coordinator.group.modern.connect.group import ConnectGroup
from coordinator.group.modern.consumer.group import ConsumerGroup
from coordinator.group.streams.model import StreamsGroup, Tasks, by_subtopology
from ops.materialise import OffsetsReplay


class TopicNamer:
    def __init__(self, names: dict[uuid.UUID, str]) -> None:
        self.names = names

    def __call__(self, topic_id: uuid.UUID) -> str:
        return self.names.get(topic_id) or str(topic_id)

    def assignment(self, assignment) -> dict[str, list[int]]:
        """{topic name: sorted partitions} of a {topic id: partitions} assignment."""
        out: dict[str, list[int]] = {}
        for tid, parts in assignment.items():
            if parts:
                out.setdefault(self(tid), []).extend(parts)
        return {t: sorted(ps) for t, ps in sorted(out.items())}


def classic_assignment(protocol_type: str | None, data: bytes) -> dict[str, list[int]] | None:
    """A classic member's assignment bytes, read as ConsumerProtocol when they are one."""
    if protocol_type != "consumer" or not data:
        return {} if protocol_type == "consumer" else None
    try:
        a = ConsumerProtocolMemberAssignment.decode(data)
        return {t: sorted(ps) for t, ps in sorted(a.assignment)}
    except Exception:
        return None


# ------------------------------------------------------------------ JSON model
def _consumer_group(group: ConsumerGroup, name: TopicNamer, default_assignor: str) -> dict:
    members = []
    for m in sorted(group.members.values(), key=lambda m: m.member_id):
        members.append({
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
            "client_id": m.client_id, "client_host": m.client_host,
            "member_type": "classic" if m.uses_classic_protocol else "consumer",
            "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch,
            "state": m.state.name, "subscribed_topic_names": sorted(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex or None,
            "server_assignor": m.server_assignor,
            "assignment": name.assignment(m.assigned_partitions),
            "partitions_pending_revocation": name.assignment(m.partitions_pending_revocation),
            "target_assignment": name.assignment(group.target_of(m.member_id)),
        })
    return {"group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "metadata_hash": group.metadata_hash,
            "assignor": group.preferred_server_assignor(default_assignor),
            "members": members}


def _classic_group(group: ClassicGroup) -> dict:
    members = []
    for m in sorted(group.members.values(), key=lambda m: m.member_id):
        decoded = classic_assignment(group.protocol_type, m.assignment)
        members.append({
            "member_id": m.member_id, "group_instance_id": m.group_instance_id,
            "client_id": m.client_id, "client_host": m.client_host,
            "member_type": "classic", "session_timeout_ms": m.session_timeout_ms,
            "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "assignment": decoded if decoded is not None
            else {"raw": base64.b64encode(m.assignment).decode()},
        })
    return {"generation": group.generation_id, "protocol": group.protocol_name,
            "leader": group.leader_id, "members": members}


def _units(units) -> dict[str, list[int]]:
    """{connector: sorted tasks} of a worker's units (Units or TargetUnits)."""
    return {c: sorted(ts) for c, ts in sorted(units.items()) if ts}


def _connect_group(group: ConnectGroup) -> dict:
    members = []
    for m in sorted(group.members.values(), key=lambda m: m.member_id):
        members.append({
            "member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id,
            "client_host": m.client_host, "member_type": "connect", "member_epoch": m.member_epoch,
            "previous_member_epoch": m.previous_member_epoch, "state": m.state.name,
            "client_assignors": [a.name for a in m.client_assignors],
            "assignment": _units(m.assigned), "pending_revocation": _units(m.pending_revocation),
            "target_assignment": _units(group.target_of(m.member_id).units),
        })
    return {"group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "assignor": group.assignor_name, "members": members}


def _tasks(tasks) -> dict[str, list[int]]:
    """{subtopology id: sorted partitions} of a set of tasks."""
    return dict(by_subtopology(tasks))


def _task_kinds(tasks: Tasks) -> dict[str, dict[str, list[int]]]:
    return {"active": _tasks(tasks.active), "standby": _tasks(tasks.standby), "warmup": _tasks(tasks.warmup)}


def _streams_group(group: StreamsGroup) -> dict:
    members = []
    for m in sorted(group.members.values(), key=lambda m: m.member_id):
        target = group.target.get(m.member_id, Tasks())
        members.append({
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
            "client_id": m.client_id, "client_host": m.client_host, "member_type": "streams",
            "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch,
            "state": m.state.name, "topology_epoch": m.topology_epoch, "process_id": m.process_id,
            "user_endpoint": None if m.user_endpoint is None else f"{m.user_endpoint[0]}:{m.user_endpoint[1]}",
            "client_tags": dict(sorted(m.client_tags)), "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "assignment": _tasks(m.assigned.active), "standby_tasks": _tasks(m.assigned.standby),
            "warmup_tasks": _tasks(m.assigned.warmup), "pending_revocation": _task_kinds(m.pending_revocation),
            "target_assignment": _tasks(target.active), "target_standby_tasks": _tasks(target.standby),
            "target_warmup_tasks": _tasks(target.warmup),
        })
    top = group.topology
    topology = None if top is None else {"epoch": top.epoch, "subtopologies": [
        {"subtopology_id": s.subtopology_id, "source_topics": sorted(s.source_topics),
         "source_topic_regex": sorted(s.source_topic_regex),
         "repartition_sink_topics": sorted(s.repartition_sink_topics),
         "repartition_source_topics": sorted(t.name for t in s.repartition_source_topics),
         "state_changelog_topics": sorted(t.name for t in s.state_changelog_topics)}
        for s in sorted(top.subtopologies, key=lambda s: s.subtopology_id)]}
    return {"group_epoch": group.group_epoch, "assignment_epoch": group.target_assignment_epoch,
            "metadata_hash": group.metadata_hash, "validated_topology_epoch": group.validated_topology_epoch,
            "topology": topology, "members": members}


def group_model(gid: str, partition: int, group, shard, name: TopicNamer) -> dict:
    out = {"group": gid, "partition": partition, "type": group_type_name(group),
           "protocol_type": protocol_type_of(group), "state": group_state_name(group)}
    if isinstance(group, ConsumerGroup):
        out.update(_consumer_group(group, name, shard.config.default_assignor))
    elif isinstance(group, ConnectGroup):
        out.update(_connect_group(group))
    elif isinstance(group, StreamsGroup):
        out.update(_streams_group(group))
    else:
        out.update(_classic_group(group))
    offsets = []
    for topic, parts in sorted(shard.offsets.group(gid).items()):
        for p, o in sorted(parts.items()):
            offsets.append({"topic": topic, "partition": p, "offset": o.offset,
                            "leader_epoch": o.leader_epoch, "metadata": o.metadata,
                            "commit_timestamp": o.commit_timestamp,
                            "expire_timestamp": o.expire_timestamp})
    out["offsets"] = offsets
    pending = []
    for pid, groups in sorted(shard.offsets.pending_transactional.items()):
        for topic, parts in sorted(groups.get(gid, {}).items()):
            for p, o in sorted(parts.items()):
                pending.append({"producer_id": pid, "topic": topic, "partition": p, "offset": o.offset})
    out["pending_transactional_offsets"] = pending
    return out


def replay_model(replay: OffsetsReplay, groups: Iterable[str] | None = None,
                 image: MetadataImage | None = None) -> dict:
    """`image`: topic ids and names from a live cluster (--bootstrap), beyond what the log names."""
    full = replay.image(image)
    replay.use_image(full)
    name = TopicNamer({t.topic_id: t.name for t in full.topics_by_id.values()})
    wanted = set(groups) if groups else None
    out = []
    for gid, (p, group) in sorted(replay.groups().items()):
        if wanted is None or gid in wanted:
            out.append(group_model(gid, p, group, replay.shards[p], name))
    # Groups that only have offsets (no group record at all) do not exist for Kafka either:
    # replay creates a simple classic group for every offset commit, so none are missed.
    s = replay.stats
    return {
        "groups": out,
        "summary": {
            "partitions": sorted(s.partitions), "batches": s.batches, "records": s.records,
            "tombstones": s.tombstones, "commit_markers": s.commit_markers,
            "abort_markers": s.abort_markers, "by_type": s.by_type(replay.skipped_record_types()),
            "unknown_types": {str(k): v for k, v in sorted(replay.unknown_record_types().items())},
            "first_timestamp": s.first_timestamp, "last_timestamp": s.last_timestamp,
            "groups": len(replay.groups()),
            "problems": [p.as_dict() for p in replay.problems.items],
        },
    }


# ------------------------------------------------------------------ text layout
def render_table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    fmt = lambda r: " ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(headers)] + [fmt(r) for r in cells])


def assignment_text(a: dict[str, list[int]] | None) -> str:
    if not a or "raw" in a:
        return "-"
    return ";".join(f"{t}:{','.join(map(str, ps))}" for t, ps in a.items())


def described_assignment(m: dict) -> dict:
    """A member's partitions as ConsumerGroupDescribe (and so `kafka-consumer-groups
    --describe`) shows them: Kafka's `asConsumerGroupDescribeMember` adds the partitions
    pending revocation, which the member still owns, to the assigned ones."""
    pending = m.get("partitions_pending_revocation") or {}
    if not pending:
        return m["assignment"]
    merged = {t: list(ps) for t, ps in m["assignment"].items()}
    for t, ps in pending.items():
        merged.setdefault(t, []).extend(ps)
    return {t: sorted(set(ps)) for t, ps in sorted(merged.items())}


# Group types with group and assignment epochs (KIP-848's model; connect and streams groups share it).
_EPOCH_TYPES = ("consumer", "connect", "streams")


def _epoch(g: dict, consumer_key: str, classic_key: str = "generation"):
    return g[consumer_key] if g["type"] in _EPOCH_TYPES else g.get(classic_key, "-")


def render_text(model: dict) -> str:
    groups = model["groups"]
    out = []
    out.append(render_table(["GROUP", "TYPE", "PROTOCOL", "STATE"],
                            [[g["group"], g["type"].capitalize(), g["protocol_type"] or "-", g["state"]]
                             for g in groups]))
    out.append("")
    out.append(render_table(
        ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
         "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"],
        [[g["group"], f"partition ({g['partition']})",
          (g.get("assignor") if g["type"] in _EPOCH_TYPES else g.get("protocol")) or "-", g["state"],
          _epoch(g, "group_epoch"), g["assignment_epoch"] if g["type"] in _EPOCH_TYPES else "-",
          len(g["members"])] for g in groups]))
    out.append("")
    member_rows = []
    for g in groups:
        for m in g["members"]:
            a = described_assignment(m) if g["type"] == "consumer" else m["assignment"]
            n = sum(len(ps) for t, ps in a.items() if t != "raw") if isinstance(a, dict) else 0
            if g["type"] in _EPOCH_TYPES:
                # A connect worker's units read `connector:tasks` (task -1: the connector), a
                # streams member's active tasks `subtopology:partitions`.
                epochs = (m["member_epoch"], assignment_text(a), g["assignment_epoch"],
                          assignment_text(m["target_assignment"]))
            else:
                epochs = (g["generation"], assignment_text(a), "-", "-")
            member_rows.append([g["group"], m["member_id"], m["client_host"] or "-",
                                m["client_id"] or "-", n, *epochs])
    out.append(render_table(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                             "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                             "TARGET-ASSIGNMENT"], member_rows))
    out.append("")
    offset_rows = []
    for g in groups:
        owner = {}
        for m in g["members"] if g["type"] != "streams" else ():   # streams tasks name subtopologies
            if isinstance(m["assignment"], dict):
                owned = described_assignment(m) if g["type"] == "consumer" else m["assignment"]
                for t, ps in owned.items():
                    for p in ps if t != "raw" else ():
                        owner[(t, p)] = m
        for o in g["offsets"]:
            m = owner.get((o["topic"], o["partition"]))
            offset_rows.append([g["group"], o["topic"], o["partition"],
                                o["leader_epoch"] if o["leader_epoch"] >= 0 else "-", o["offset"],
                                "-", "-", m["member_id"] if m else "-",
                                (m["client_host"] or "-") if m else "-",
                                (m["client_id"] or "-") if m else "-"])
    out.append(render_table(["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "CURRENT-OFFSET",
                             "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
                            offset_rows))
    s = model["summary"]
    out.append("")
    out.append(f"{s['records']} records in {s['batches']} batches over partitions "
               f"{_ranges(s['partitions'])}; {s['tombstones']} tombstones, "
               f"{s['commit_markers']} COMMIT and {s['abort_markers']} ABORT markers; "
               f"{s['groups']} groups")
    out.append("records by type: " + ", ".join(f"{k} {v}" for k, v in s["by_type"].items()))
    if s["unknown_types"]:
        out.append("skipped unknown record types (KIP-915): "
                   + ", ".join(f"type {k}: {v}" for k, v in s["unknown_types"].items()))
    if s["problems"]:
        out.append(f"WARNING: {len(s['problems'])} damaged parts of the input were skipped; "
                   "the state above may be incomplete:")
        out.extend(f"  {p['source']} byte {p['position']}: {p['reason']} (skipped {p['skipped']})"
                   for p in s["problems"])
    return "\n".join(out) + "\n"


def _ranges(ps: list[int]) -> str:
    if not ps:
        return "none"
    out, start, prev = [], ps[0], ps[0]
    for p in ps[1:] + [None]:
        if p is not None and p == prev + 1:
            prev = p
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if p is not None:
            start = prev = p
    return ",".join(out)
