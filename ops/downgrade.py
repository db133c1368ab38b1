"""KIP-915 downgrade check: what a classic-only coordinator would make of a log.

The log is replayed twice with the coordinator's own `Replayer`:
- the full replay, as kcoord (and Kafka 4.3) load it;
- the classic-only view, as a downgraded coordinator that implements KIP-915 loads it:
  only record types 0-2 are known, every other type is skipped as unknown, and an
  OffsetCommitValue/GroupMetadataValue newer than the highest version it knows (4, the
  first flexible one) is read at version 4, unknown tagged fields skipped.

The report diffs committed offsets and group metadata between the two, lists the groups
that would lose state and why, and counts each group's new-protocol records (and how
many of their keys are still live, i.e. not tombstoned: KIP-915 relies on the
conversion tombstones and the log cleaner to remove them).

Value versions (ops/value_versions.py): every record's value version is checked against the
highest each Kafka line reads, 3.9 to 4.4; a known type above it fails that line's partition
load (KAFKA-18672), so the report names the lines and records, and each group with such records
gets a reason. (Real 3.9 throws on an OffsetCommitValue above version 4 too; the classic-only
view above reads it at version 4, the KIP-915 intent, and the value-version section says
where real Kafka differs.)

`tombstones()` builds, for review, the tombstones a coordinator appends when a group is
converted to classic (`createGroupTombstoneRecords`), plus tombstones for live keys of
record types the classic coordinator cannot read.

Per-group configuration (private type 1200, docs/user/group-configs.md) is never read by Kafka:
every group with a live config record is reported as losing it, with the keys to set again
with `kafka-configs --entity-type groups` on Kafka (Kafka keeps group configs in its cluster
metadata, not in this log).

Streams groups (KIP-1071, Kafka's types 17 and 19-23) live only in records a classic-only
coordinator skips, and in Kafka before 4.1, which has no streams group type: their members,
epochs, assignments and topology are forgotten there, committed offsets are kept. Kafka 4.4
converts an empty streams group to classic on its first JoinGroup (offline migration), so an
empty one gets Kafka's deletion tombstones (its offsets stay); one with members is left alone
until its application stops (the Streams instances with `group.protocol=classic`).

kcoord's `connect` groups (private types 1000-1004, docs/design/connect-groups-spec.md) always lose their state:
Kafka skips those types but never deletes them and has no connect group type. Empty ones
get their deletion tombstones; ones with workers are left alone until the workers stop.
"""
from __future__ import annotations

import struct
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from coordinator.group.classic.group import ClassicGroup
from coordinator.group.group_admin import group_tombstones
from coordinator.group.group_types import group_type
from coordinator.group.modern.connect.record_helpers import group_tombstones as connect_group_tombstones
from coordinator.group.modern.consumer.group import ConsumerGroup
from ops.materialise import OffsetsReplay
from ops.recordjson import type_name
from ops.value_versions import ValueVersionScan, group_of_raw_key, value_version
from records import UnknownRecord, decode_record, encode_key
from records.batch import RecordBatch
from records.group_config_records import GROUP_CONFIG, GroupConfigValue
from records.partitioner_records import is_partitioner_marker, marker_partitioner

CLASSIC_TYPES = (0, 1, 2)
# The highest value versions a classic coordinator with KIP-915 knows (both flexible).
CLASSIC_HIGHEST_VERSION = {1: 4, 2: 4}
_VERSION_4 = b"\x00\x04"


def classic_only_decode(key: bytes, value: bytes | None):
    """Decode as a classic-only coordinator (KIP-915): unknown types skipped, newer
    flexible versions read at the highest known version."""
    if key is not None and len(key) >= 2 and key[0] == 0 and key[1] in CLASSIC_TYPES:
        highest = CLASSIC_HIGHEST_VERSION.get(key[1])
        if highest is not None and value is not None and len(value) >= 2:
            version = struct.unpack_from(">h", value)[0]
            if version > highest:
                value = _VERSION_4 + bytes(value[2:])
        return decode_record(key, value)
    rtype = struct.unpack_from(">h", key)[0] if key is not None and len(key) >= 2 else -1
    return UnknownRecord(rtype, bytes(key or b""), None if value is None else bytes(value))


def group_of_key(record) -> str | None:
    """The group a record belongs to; for unknown types the key's first string, which is
    the group id in every group record type Kafka has defined (share, streams)."""
    if isinstance(record, UnknownRecord):
        return group_of_raw_key(record.key)
    key = record.key
    return getattr(key, "group", None) or getattr(key, "group_id", None)


@dataclass
class NewProtocolRecords:
    """Records of types the classic coordinator does not know, per group, and the keys
    whose last record is not a tombstone (they stay in the log after compaction)."""
    counts: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    live: dict[tuple[int, bytes], tuple[str | None, int]] = field(default_factory=dict)
    partition_of: dict[str, int] = field(default_factory=dict)
    # Every record's value version against what each Kafka line reads (ops/value_versions.py).
    value_versions: ValueVersionScan = field(default_factory=ValueVersionScan)
    # group -> the config keys its last GROUP_CONFIG record sets (kcoord-private type 1200).
    configs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # (partition, offset, partitioner or None) of each partitioner marker (kcoord-private type 1300).
    partitioner_markers: list[tuple[int, int, str | None]] = field(default_factory=list)

    def observe(self, partition: int, record, offset: int, timestamp: int) -> None:
        if isinstance(record, RecordBatch):      # a transaction marker
            return
        if isinstance(record, UnknownRecord) and is_partitioner_marker(record.key):
            # The log's, not a group's: its key holds no group id (records/partitioner_records.py).
            self.partitioner_markers.append((partition, offset, marker_partitioner(record.key, record.value)))
            return
        group = group_of_key(record)
        if isinstance(record, UnknownRecord):
            rtype, key_bytes, live = record.record_type, record.key, record.value is not None
            version = value_version(record.value)
        else:
            rtype, key_bytes, live = record.key.record_type, None, record.value is not None
            version = record.value_version if live else None
        if not self.value_versions.raw:
            self.value_versions.observe(partition, offset, rtype, version, group)
        if rtype in CLASSIC_TYPES:
            return
        if rtype == GROUP_CONFIG and group is not None:
            self._config(group, record.value)
        if group is not None:
            self.partition_of[group] = partition
        self.counts[group or "(no group id)"][type_name(rtype) if rtype >= 0 else "unknown"] += 1
        k = (partition, key_bytes if key_bytes is not None else encode_key(record.key))
        if live:
            self.live[k] = (group, rtype)
        else:
            self.live.pop(k, None)

    def _config(self, group: str, value) -> None:
        if value is None:                                   # a tombstone: the set was emptied
            self.configs.pop(group, None)
        elif isinstance(value, GroupConfigValue):
            self.configs[group] = tuple(e.name for e in value.configs)
        else:                                               # a value this kcoord cannot decode
            self.configs[group] = ()

    def live_keys_of(self, group: str) -> list[tuple[int, bytes, int]]:
        return [(p, k, t) for (p, k), (g, t) in self.live.items() if g == group]


def _offsets(replay: OffsetsReplay) -> dict[tuple[str, str, int], object]:
    out = {}
    for shard in replay.shards.values():
        for gid, topics in shard.offsets.offsets.items():
            for topic, parts in topics.items():
                for p, o in parts.items():
                    out[(gid, topic, p)] = o
    return out


def _classic_summary(g) -> dict:
    if g is None:
        return {"type": "absent"}
    return _rule(g).summary(g)


def _consumer_summary(g: ConsumerGroup) -> dict:
    out = {"type": "consumer", "state": g.state.value, "members": len(g.members), "group_epoch": g.group_epoch}
    uses = _client_assignors(g)
    if uses:
        out["client_assignors"] = uses
    return out


def _client_assignors(g: ConsumerGroup) -> list[str]:
    """The client-side assignors (docs/design/client-assignors-spec.md) this group's records name:
    kcoord-only tags >= 1000."""
    names = {s.name for m in g.members.values() for s in m.client_assignors or ()}
    if g.client_assignor_name is not None:
        names.add(g.client_assignor_name)
    return sorted(names)


def _classic_group_summary(g: ClassicGroup) -> dict:
    return {"type": "classic", "state": g.state.value, "members": len(g.members),
            "generation": g.generation_id, "protocol_type": g.protocol_type or "",
            "protocol": g.protocol_name, "simple": g.is_simple()}


def _classic_reasons(full: ClassicGroup, view) -> tuple[bool, list[str]]:
    reasons = _classic_differences(full, view)
    return bool(reasons), reasons


def _classic_differences(full: ClassicGroup, view: ClassicGroup | None) -> list[str]:
    if view is None or not isinstance(view, ClassicGroup):
        return ["the classic group is missing from the classic-only view"]
    out = []
    for attr in ("generation_id", "protocol_type", "protocol_name", "leader_id"):
        a, b = getattr(full, attr), getattr(view, attr)
        if a != b:
            out.append(f"{attr} {a!r} would become {b!r}")
    if set(full.members) != set(view.members):
        out.append(f"members {sorted(full.members)} would become {sorted(view.members)}")
    else:
        for mid, m in full.members.items():
            if m.assignment != view.members[mid].assignment:
                out.append(f"member {mid}: its assignment would differ")
    return out


def _consumer_reasons(g: ConsumerGroup, view=None) -> tuple[bool, list[str]]:
    if not g.members:
        return False, [f"empty consumer group: its group epoch {g.group_epoch} lives only in new "
                       "record types and is forgotten; committed offsets are kept"]
    consumers = sum(1 for m in g.members.values() if not m.uses_classic_protocol)
    classic = len(g.members) - consumers
    reasons = [f"{len(g.members)} member(s) ({consumers} consumer-protocol, {classic} classic-"
               f"protocol), their epochs and assignments (group epoch {g.group_epoch}, "
               f"assignment epoch {g.assignment_epoch}) exist only in record types 3-8",
               "the classic-only coordinator sees no group: members must rejoin and the "
               "group rebalances from scratch"]
    if consumers:
        reasons.append("KIP-915: downgrade these consumers first; the group converts to "
                       "classic when its last consumer-protocol member leaves")
    else:
        reasons.append("all members use the classic protocol: the group converts to classic "
                       "(and stays intact) once the new coordinator handles their next leave")
    if g.resolved_regexes:
        reasons.append(f"{len(g.resolved_regexes)} resolved regular expression(s) are dropped")
    uses = _client_assignors(g)
    if uses:
        reasons.append(f"uses kcoord's client-side assignors {uses} (docs/design/client-assignors-spec.md): "
                       "their state is in tagged fields >= 1000 that Kafka and other coordinators ignore, "
                       "so the group runs with a server-side assignor there and its members' computed metadata is lost")
    return True, reasons


def _consumer_tombstones(g: ConsumerGroup) -> tuple[list, str | None]:
    if g.members:
        kinds = Counter("classic" if m.uses_classic_protocol else "consumer" for m in g.members.values())
        return [], (f"{len(g.members)} active member(s) ({dict(kinds)}): the coordinator converts the group "
                    "when its last consumer-protocol member leaves; tombstoning it now would drop them")
    return group_tombstones(g), None


def _connect_summary(g) -> dict:
    return {"type": "connect", "state": g.state.value, "members": len(g.members), "group_epoch": g.group_epoch}


def _connect_reasons(g, view=None) -> tuple[bool, list[str]]:
    # Records 1000-1004 are kcoord-private (docs/design/connect-groups-spec.md): Kafka's loader decodes them as unknown
    # and skips them, but never tombstones them, so they stay in the log for good.
    reasons = [f"connect group ({len(g.members)} worker(s), group epoch {g.group_epoch}): its state lives "
               "only in kcoord's private record types 1000-1004, which Kafka skips (KIP-915) but never "
               "deletes; Kafka has no connect group type, so its workers cannot rejoin there"]
    if g.members:
        reasons.append("stop its workers, then remove it with `kcoord groups delete` (on kcoord) or "
                       "`kcoord offsets downgrade-check --write-tombstones FILE [--apply ...]`")
    else:
        reasons.append("empty: `kcoord groups delete` (on kcoord) or `--write-tombstones FILE [--apply ...]` "
                       "removes its records before the log moves to Kafka")
    return True, reasons


def _connect_tombstones(g) -> tuple[list, str | None]:
    if g.members:
        return [], (f"connect group with {len(g.members)} worker(s): stop them first (tombstoning a "
                    "running group would fence them); then rerun, or `kcoord groups delete` it")
    return connect_group_tombstones(g), None


def _streams_summary(g) -> dict:
    return {"type": "streams", "state": g.state().value, "members": len(g.members), "group_epoch": g.group_epoch,
            "topology_epoch": None if g.topology is None else g.topology.epoch}


def _streams_reasons(g, view=None) -> tuple[bool, list[str]]:
    if not g.members:
        return True, [f"empty streams group: its group epoch {g.group_epoch} and topology live only in record "
                      "types 17 and 19-23 and are forgotten; committed offsets are kept"]
    return True, [f"{len(g.members)} streams member(s) (group epoch {g.group_epoch}, target assignment epoch "
                  f"{g.target_assignment_epoch}): their tasks and the topology exist only in record types 17 "
                  "and 19-23, which a classic-only coordinator (and Kafka before 4.1) skips",
                  "stop the application, then restart it with group.protocol=classic: migration is offline "
                  "only (Kafka 4.4 converts an empty streams group to classic on JoinGroup), offsets are kept"]


def _streams_tombstones(g) -> tuple[list, str | None]:
    if g.members:
        return [], (f"streams group with {len(g.members)} member(s): stop the application first (migration "
                    "is offline only); tombstoning a running group would fence its members")
    return group_tombstones(g), None


@dataclass(frozen=True)
class DowngradeRule:
    """What the downgrade check says about one group type (registered by its type name,
    group_types.py). A new group type registers one; a type without a rule is reported as
    losing its state, since a classic-only coordinator reads only classic records."""
    classic_readable: bool                       # its records are ones a classic-only coordinator reads
    summary: Callable[[object], dict]
    reasons: Callable[[object, object], tuple[bool, list[str]]]       # (group, classic view) -> (loses, why)
    # (tombstones converting the group for a classic-only coordinator, or why it is left alone)
    tombstones: Callable[[object], tuple[list, str | None]] = lambda g: ([], None)


DOWNGRADE_RULES: dict[str, DowngradeRule] = {
    "consumer": DowngradeRule(False, _consumer_summary, _consumer_reasons, _consumer_tombstones),
    "classic": DowngradeRule(True, _classic_group_summary, _classic_reasons),
    "connect": DowngradeRule(False, _connect_summary, _connect_reasons, _connect_tombstones),
    "streams": DowngradeRule(False, _streams_summary, _streams_reasons, _streams_tombstones),
}
_TOMBSTONE_WHY = {"consumer": "empty consumer group converted to classic (createGroupTombstoneRecords)",
                  "streams": "empty streams group deleted (createGroupTombstoneRecords); its offsets are kept",
                  "connect": "empty connect group deleted (kcoord-private types 1000-1004: Kafka never "
                             "deletes them)"}


def _unknown_type_rule(name: str) -> DowngradeRule:
    return DowngradeRule(
        False, lambda g: {"type": name, "members": len(getattr(g, "members", ()))},
        lambda g, v: (True, [f"a {name} group lives only in record types a classic-only coordinator "
                             "skips: it is forgotten"]),
        lambda g: ([], f"no downgrade rule for {name} groups: left alone"))


def _rule(g) -> DowngradeRule:
    name = group_type(g).name
    rule = DOWNGRADE_RULES.get(name)
    return rule if rule is not None else _unknown_type_rule(name)


def check(full: OffsetsReplay, classic: OffsetsReplay, new_records: NewProtocolRecords) -> dict:
    full_groups, view_groups = full.groups(), classic.groups()
    groups = []
    for gid in sorted(set(full_groups) | set(view_groups) | set(new_records.counts) - {"(no group id)"}):
        p, g = full_groups.get(gid, (None, None))
        vp, v = view_groups.get(gid, (None, None))
        loses, reasons = False, []
        rule = _rule(g) if g is not None else None
        if rule is not None:
            loses, reasons = rule.reasons(g, v)
        elif v is not None:
            reasons = ["the group exists only in the classic-only view"]
        keys = new_records.configs.get(gid)
        if keys is not None:
            loses = True
            reasons.append(_config_reason(gid, keys))
        live = new_records.live_keys_of(gid)
        unreadable = new_records.value_versions.unreadable_lines(gid)
        if unreadable:
            reasons.append(f"records with value versions Kafka {', '.join(unreadable)} cannot read: "
                           "the partition's load fails there (KAFKA-18672)")
        if rule is not None and rule.classic_readable and live:
            reasons.append(f"{len(live)} live key(s) of record types the classic coordinator "
                           "skips: left-overs it would log a WARN for at every load (KIP-915)")
        groups.append({
            "group": gid,
            "partition": p if p is not None else vp if vp is not None else new_records.partition_of.get(gid),
            "full": _classic_summary(g), "classic_view": _classic_summary(v),
            "would_lose_state": loses, "reasons": reasons,
            "new_protocol_records": dict(sorted(new_records.counts.get(gid, Counter()).items())),
            "live_new_protocol_keys": len(live),
        })
    fo, co = _offsets(full), _offsets(classic)
    missing = [{"group": g, "topic": t, "partition": p, "offset": o.offset}
               for (g, t, p), o in sorted(fo.items()) if (g, t, p) not in co]
    different = [{"group": g, "topic": t, "partition": p, "offset": o.offset,
                  "classic_view_offset": co[(g, t, p)].offset,
                  "fields": [f for f in ("offset", "leader_epoch", "metadata", "commit_timestamp",
                                         "expire_timestamp")
                             if getattr(o, f) != getattr(co[(g, t, p)], f)]}
                 for (g, t, p), o in sorted(fo.items())
                 if (g, t, p) in co and _offset_differs(o, co[(g, t, p)])]
    extra = [{"group": g, "topic": t, "partition": p, "offset": o.offset}
             for (g, t, p), o in sorted(co.items()) if (g, t, p) not in fo]
    losing = [g["group"] for g in groups if g["would_lose_state"]]
    # Several processes: a kcoord cluster writes through transactions, and a fenced owner's open one
    # is aborted by its successor. kcoord's readers drop those records; Kafka's loader
    # applies group records whatever their marker says, so moving this log to Kafka as it is
    # would bring them back. They must be stripped first.
    aborted = full.stats.aborted_group_records + full.stats.open_group_records
    return {
        "verdict": "state would be lost" if losing or missing or different
        else "aborted records must be stripped" if aborted else "no state lost",
        "groups_losing_state": losing,
        "aborted_group_records": {
            "aborted": full.stats.aborted_group_records, "open": full.stats.open_group_records,
            "note": "group records of aborted or unfinished transactions (a fenced kcoord owner's): kcoord "
                    "skips them, Kafka's loader would apply them; strip them before moving this log to Kafka"
                    if aborted else ""},
        "groups": groups,
        "group_configs": [{"group": g, "keys": list(k)} for g, k in sorted(new_records.configs.items())],
        "partitioner": _partitioner_report(new_records.partitioner_markers),
        "value_versions": new_records.value_versions.report(),
        "offsets": {"compared": len(fo), "missing": missing, "different": different,
                    "only_in_classic_view": extra},
        "summary": {"records": full.stats.records,
                    "new_protocol_records": sum(sum(c.values()) for c in new_records.counts.values()),
                    "live_new_protocol_keys": len(new_records.live),
                    "skipped_by_classic_view": {str(k): v for k, v in
                                                sorted(classic.unknown_record_types().items())},
                    "problems": [p.as_dict() for p in full.problems.items]},
    }


def _partitioner_report(markers: list[tuple[int, int, str | None]]) -> dict:
    """The partitioner markers (coordinator/service/partitioner.py): the first one of partition 0
    says the topic's placement. Kafka skips them (KIP-915) and places groups by its own formula."""
    first = min(markers, default=None, key=lambda m: (m[0], m[1]))
    placement = first[2] if first is not None and first[0] == 0 else None
    return {"markers": [{"partition": p, "offset": o, "partitioner": n} for p, o, n in markers],
            "placement": placement or "legacy",
            "note": f"this topic places groups with the {placement} partitioner (partitioner marker); kcoord "
                    "versions before the marker route half the groups elsewhere on this topic (every group "
                    "with a negative Java hash): do not start one on it"
            if placement is not None else
            "no partitioner marker: if kcoord wrote this log, an earlier kcoord placed its groups with "
            "(hashCode & 0x7fffffff) % partitions; Kafka's coordinator reads a group from abs(hashCode) % "
            "partitions, so about half the groups would not be found there: re-partition first "
            "(`kcoord offsets load` into a new topic)"}


def _config_reason(group: str, keys: tuple[str, ...]) -> str:
    named = ", ".join(keys) if keys else "a value this kcoord cannot decode"
    return (f"per-group configuration ({named}) lives only in kcoord's private record type 1200 "
            "(GROUP_CONFIG), which Kafka never reads (it skips the type, KIP-915): on Kafka the group runs "
            "with the broker's defaults; set the configs again there with `kafka-configs --bootstrap-server "
            f"KAFKA --entity-type groups --entity-name {group} --alter --add-config KEY=VALUE`")


def _offset_differs(a, b) -> bool:
    # topic_id is a KIP-848 field the classic coordinator never knew: not a loss.
    return (a.offset, a.leader_epoch, a.metadata, a.commit_timestamp, a.expire_timestamp) != \
        (b.offset, b.leader_epoch, b.metadata, b.commit_timestamp, b.expire_timestamp)


def tombstones(full: OffsetsReplay, new_records: NewProtocolRecords) -> tuple[list[dict], list[dict]]:
    """(tombstones to review, groups left alone and why). Each tombstone: partition,
    type, group, key bytes, why."""
    out, skipped, covered = [], [], set()
    for gid, (p, g) in sorted(full.groups().items()):
        rule = _rule(g)
        if rule.classic_readable:
            continue
        records, left_alone = rule.tombstones(g)
        if left_alone is not None:
            skipped.append({"group": gid, "reason": left_alone})
            continue
        for rec in records:
            key = encode_key(rec.key)
            covered.add((p, key))
            out.append({"partition": p, "group": gid, "type": type_name(rec.key.record_type),
                        "key": key, "why": _TOMBSTONE_WHY.get(group_type(g).name, "group deleted")})
    for (p, key), (gid, rtype) in sorted(new_records.live.items(), key=lambda kv: kv[0]):
        if (p, key) in covered:
            continue
        g = full.groups().get(gid, (None, None))[1] if gid else None
        if g is not None and not _rule(g).classic_readable:
            continue   # live records of a group its own rule handled above
        out.append({"partition": p, "group": gid, "type": type_name(rtype), "key": key,
                    "why": "live key of a record type the classic coordinator cannot read (KIP-915 "
                           "clean-up)"})
    return out, skipped


def tombstone_batches(items: list[dict], timestamp_ms: int) -> list:
    """The tombstones as LogBatches (for a review dump or for writing), one per partition."""
    from ops.dumpfile import DumpRecord
    from ops.logsource import LogBatch
    by_partition: dict[int, list] = defaultdict(list)
    for t in items:
        by_partition[t["partition"]].append(t["key"])
    out = []
    for p, keys in sorted(by_partition.items()):
        recs = [DumpRecord(-1, timestamp_ms, k, None) for k in keys]
        out.append(LogBatch("tombstones", p, RecordBatch(-1, 0, 2, -1, -1, -1, -1, -1, -1, False,
                                                         False, 0, recs)))
    return out


__all__ = ["classic_only_decode", "check", "tombstones", "tombstone_batches", "NewProtocolRecords"]
