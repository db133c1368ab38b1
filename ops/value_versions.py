"""Which coordinator record value versions each Kafka line reads (`kcoord offsets downgrade-check`).

Rules:
- The table is read off each release's kafka-group-coordinator jar (`common/message/*Value.json`,
  `validVersions`; the record type is the key's `apiKey`, in 3.9 the key's version), never
  guessed. Kafka 4.4's column equals records/generated/index.py, which is generated from that
  jar (tests/unit/ops/test_downgrade_value_versions.py holds the two equal).
- A record type a line does not list is unknown there and its loader skips it (KIP-915): not
  a failure, the downgrade check's group report covers what is lost that way.
  kcoord's private types (connect groups 1000-1004, group configs 1200) are in no line:
  Kafka skips them, and the downgrade check's group report says what is lost.
- A listed type at a value version above the line's highest fails the partition's load:
  Kafka 4.0.0 and later check it on every record (KAFKA-18672, `CoordinatorRecordSerde`:
  UnknownRecordVersionException); 3.9's classic coordinator, its default, throws for types 0-2
  ("Unknown offset message version", `GroupMetadataManager.readOffsetMessageValue`). 3.9's opt-in
  new coordinator did not check and would misread such a value; its types 3-11 are left out.
- Every record counts, superseded or not: the loader reads the whole log, so a record above
  the line's versions fails the load until compaction has removed it. Tombstones have no value.
- Memory stays bounded whatever the log: counts per (line, type, version) and the first
  EXAMPLES records per line.
"""
from __future__ import annotations

import struct
from collections import Counter

_KIP_848 = dict.fromkeys(range(3, 9), 0)                 # ConsumerGroup* records
_SHARE_40 = dict.fromkeys(range(9, 17), 0)               # 4.0: share types 9-15, regex 16
_FROM_41 = {**_KIP_848, **dict.fromkeys(range(10, 18), 0), **dict.fromkeys(range(19, 24), 0)}
# line -> record type -> highest value version its coordinator reads.
HIGHEST_VALUE_VERSION: dict[str, dict[int, int]] = {
    "3.9": {0: 4, 1: 4, 2: 4},
    "4.0": {0: 4, 1: 4, 2: 4, **_KIP_848, **_SHARE_40},
    # 4.1 splits type 0 off as LegacyOffsetCommitValue (version 0 only), drops type 9
    # (ShareGroupPartitionMetadata) and adds the streams types 17 and 19-23.
    "4.1": {0: 0, 1: 4, 2: 4, **_FROM_41},
    "4.2": {0: 0, 1: 4, 2: 4, **_FROM_41},
    "4.3": {0: 0, 1: 4, 2: 4, **_FROM_41},
    "4.4": {0: 0, 1: 4, 2: 4, **_FROM_41},
}
EXAMPLES = 20


def group_of_raw_key(key: bytes | None) -> str | None:
    """A record key's first string: the group id in every group record type Kafka has
    defined (offset commits, group metadata, consumer, share, streams)."""
    if key is not None and len(key) >= 4:
        n = struct.unpack_from(">h", key, 2)[0]
        if 0 < n <= len(key) - 4:
            try:
                return bytes(key[4:4 + n]).decode()
            except UnicodeDecodeError:
                return None
    return None


def value_version(value: bytes | None) -> int | None:
    """The int16 version a coordinator record value starts with (None: tombstone or too short)."""
    if value is None or len(value) < 2:
        return None
    return struct.unpack_from(">h", value)[0]


class ValueVersionScan:
    """Records whose value version a Kafka line cannot read, per line."""

    def __init__(self, table: dict[str, dict[int, int]] | None = None) -> None:
        self.table = HIGHEST_VALUE_VERSION if table is None else table
        self.counts: dict[str, Counter] = {line: Counter() for line in self.table}
        self.examples: dict[str, list[dict]] = {line: [] for line in self.table}
        self.groups: dict[str, Counter] = {line: Counter() for line in self.table}
        self.raw = False          # fed the raw log: decoded records are not counted again

    def feed(self, lb) -> None:
        """Every record of a LogBatch (ops/logsource.py), from its raw bytes: this sees the
        records kcoord's own decoder refuses too (a newer Kafka's value versions)."""
        self.raw = True
        b = lb.batch
        if b.is_control_batch:
            return
        for r in b.records:
            key = r.key
            if key is not None and len(key) >= 2:
                self.observe(lb.partition, r.offset, struct.unpack_from(">h", key)[0], value_version(r.value),
                             group_of_raw_key(key))

    def observe(self, partition: int, offset: int, record_type: int, version: int | None,
                group: str | None) -> None:
        if version is None:
            return
        for line, highest in self.table.items():
            top = highest.get(record_type)
            if top is None or version <= top:
                continue
            self.counts[line][(record_type, version)] += 1
            if group is not None:
                self.groups[line][group] += 1
            if len(self.examples[line]) < EXAMPLES:
                self.examples[line].append({"partition": partition, "offset": offset, "type": record_type,
                                            "value_version": version, "highest_readable": top,
                                            "group": group})

    def unreadable_lines(self, group: str) -> list[str]:
        """The lines that fail to load a partition because of this group's records."""
        return [line for line in self.table if self.groups[line].get(group)]

    def report(self) -> dict:
        """Per line: "loads" or "fails", the records above its versions by (type, version),
        and the first few of them."""
        out = {}
        for line in self.table:
            counts = self.counts[line]
            out[line] = {"load": "fails" if counts else "loads",
                         "records_above": sum(counts.values()),
                         "by_type_and_version": [{"type": t, "value_version": v, "records": n}
                                                 for (t, v), n in sorted(counts.items())],
                         "examples": self.examples[line]}
        return out


def render_lines(section: dict) -> list[str]:
    """Text lines for the report's value-version section (one per Kafka line)."""
    out = []
    for line, r in section.items():
        if r["load"] == "loads":
            out.append(f"Kafka {line}: reads every value version in this log")
            continue
        kinds = ", ".join(f"type {k['type']} v{k['value_version']} ({k['records']})"
                          for k in r["by_type_and_version"])
        out.append(f"Kafka {line}: FAILS the load: {r['records_above']} record(s) above its value versions: {kinds}")
    return out


__all__ = ["EXAMPLES", "HIGHEST_VALUE_VERSION", "ValueVersionScan", "group_of_raw_key", "render_lines",
           "value_version"]
