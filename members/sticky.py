"""A sample sticky assignor with versioned metadata (the library's example).

Rules:
- Per topic, the partitions are split evenly among the topic's subscribers (counts differ
  by at most one). The members that own the most of the topic now get the larger counts,
  and every member keeps as many of its current partitions as its count allows; only
  the rest moves. Deterministic: ties go by member id.
- Metadata versions: v1 carries nothing; v2 carries the member's `weight` (a uint8 as one
  byte), and v2 members with weight 0 receive nothing when another subscriber of the topic
  can take it. The assigner reads v1 and v2 (range [1, 2]); a v1 member counts as
  weight 1. Bytes that do not parse are an error of the assigner, reported as error 1
  (`AssignorError`), not an exception in the coordinator.
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping

from .assignor import AssignorError, GroupSpec, MemberAssignment, MemberSpec, Partitions

BAD_METADATA = 1


class StickyAssignor:
    name = "sticky"
    minimum_version = 1
    maximum_version = 2

    def __init__(self, version: int = 2, weight: int = 1) -> None:
        if not self.minimum_version <= version <= self.maximum_version:
            raise ValueError(f"StickyAssignor speaks versions 1-2, not {version}")
        if not 0 <= weight <= 255:
            raise ValueError(f"weight is one byte (0-255), not {weight}")
        self.version = version
        self.weight = weight
        self.last: tuple[Partitions, int, bytes | None, int] | None = None

    def metadata(self) -> bytes:
        return b"" if self.version == 1 else bytes([self.weight])

    @staticmethod
    def weight_of(member: MemberSpec) -> int:
        if member.version == 1:
            return 1
        if member.version == 2 and len(member.metadata) == 1:
            return member.metadata[0]
        raise AssignorError(BAD_METADATA, f"member {member.member_id}: sticky v{member.version} metadata "
                                          f"{member.metadata!r} does not parse")

    def assign(self, group: GroupSpec) -> Mapping[str, MemberAssignment]:
        weights = {m.member_id: self.weight_of(m) for m in group.members.values()}
        out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in group.members}
        for topic_id in sorted(group.partitions, key=str):
            count = group.partitions[topic_id]
            subscribers = sorted(m.member_id for m in group.members.values() if topic_id in m.subscriptions)
            takers = [m for m in subscribers if weights[m] > 0] or subscribers
            if not takers:
                continue
            owned = {m: sorted(p for p in group.members[m].current.get(topic_id, ()) if p < count)
                     for m in takers}
            # the larger counts go to whoever owns most now: fewer moves
            order = sorted(takers, key=lambda m: (-len(owned[m]), m))
            base, extra = divmod(count, len(takers))
            quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
            taken: set[int] = set()
            for m in order:
                keep = [p for p in owned[m] if p not in taken][:quota[m]]
                taken.update(keep)
                out[m][topic_id] = set(keep)
            free = iter(p for p in range(count) if p not in taken)
            for m in order:
                while len(out[m][topic_id]) < quota[m]:
                    out[m][topic_id].add(next(free))
        return {m: MemberAssignment({t: frozenset(ps) for t, ps in topics.items() if ps}, self.version,
                                    self.metadata())
                for m, topics in out.items()}

    def on_assignment(self, partitions: Partitions, metadata_version: int, metadata: bytes | None,
                      error: int) -> None:
        self.last = (partitions, metadata_version, metadata, error)
