"""A streams member's reported task offsets (Kafka 4.4: `MemberTaskOffsets`, `StreamsGroup.taskOffsets`):
the changelog offset sums of the tasks whose state it has on disk (`TaskOffsets`) and the end
offsets of those it restores (`TaskEndOffsets`), from its heartbeats.

Rules (read from the 4.4.0 group-coordinator jar, docs/design/streams-groups.md, "Warm-up tasks"):
- soft state (`Soft.task_offsets`, by member id), never in records 17-23: lost on a reload, as
  Kafka's plain `HashMap` is on failover;
- a heartbeat that sends a side replaces that side; a side sent as null keeps what was there
  (`MemberTaskOffsets.update`);
- a task sent twice in one side is INVALID_REQUEST "Task offsets contain a duplicate entry for
  subtopology X and partition N." (`toNestedMap`, the same words for both sides); the values
  are kept as sent (-1, Long.MAX_VALUE included);
- bounded (kcoord): only the tasks the group's topology has, as configured against the metadata
  image (its subtopology ids, partitions below their task counts); none while it has no task
  counts. Kafka keeps whatever was sent, so a member could make the coordinator keep a whole
  request's worth of entries per member; a Streams client only reports tasks of its topology
  (stale task directories of an older topology aside, which no assignment uses), so for valid
  input both keep the same. One entry per task: at most the topology's tasks per side;
- an entry goes with its member: removed when it leaves, is fenced or replaced
  (`membership.forget_due`, Kafka's `removeMember`), and the readers see members' entries only.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from ..errors import invalid_request
from .model import Task

NONE: Mapping[Task, int] = MappingProxyType({})


class MemberOffsets(NamedTuple):
    """Kafka's `MemberTaskOffsets`: a member's last TaskOffsets and TaskEndOffsets, by task."""
    offsets: Mapping[Task, int] = NONE
    end_offsets: Mapping[Task, int] = NONE


EMPTY = MemberOffsets()


def _kept(entries: Iterable[Any], counts: Mapping[str, int] | None) -> dict[Task, int]:
    """One side as sent: a duplicate task refuses the request; tasks outside the configured
    topology are dropped (the module's rules). The subtopology id kept is the topology's own
    string, so what is kept holds no string of the request."""
    sent: set[Task] = set()
    out: dict[Task, int] = {}
    known = counts or {}
    ids = {s: s for s in known}
    for e in entries:
        task = (e.subtopology_id, e.partition)
        if task in sent:
            raise invalid_request(f"Task offsets contain a duplicate entry for subtopology {e.subtopology_id} and "
                                  f"partition {e.partition}.")
        sent.add(task)
        sub = ids.get(e.subtopology_id)
        if sub is not None and 0 <= e.partition < known[sub]:
            out[(sub, e.partition)] = e.offset
    return out


def after_heartbeat(before: MemberOffsets, req: Any, counts: Mapping[str, int] | None) -> MemberOffsets | None:
    """The member's offsets after this heartbeat (`MemberTaskOffsets.update`), or None when it
    sent neither side. Raises INVALID_REQUEST on a duplicate, before anything is kept."""
    sent, ends = req.task_offsets, req.task_end_offsets
    if sent is None and ends is None:
        return None
    return MemberOffsets(before.offsets if sent is None else MappingProxyType(_kept(sent, counts)),
                         before.end_offsets if ends is None else MappingProxyType(_kept(ends, counts)))


def store(table: dict[str, MemberOffsets], members: Mapping[str, Any], member_id: str, offsets: MemberOffsets) -> None:
    """Keep ``offsets`` for ``member_id`` (a member of ``members`` or joining it); entries of
    members no longer in the group (a removal that did not pass by `forget_due`, such as a
    replayed tombstone) are dropped once the table outgrows the group (O(1) until then)."""
    table[member_id] = offsets
    if len(table) > len(members) + 17:
        for gone in [m for m in table if m not in members and m != member_id]:
            del table[gone]


def of_members(table: Mapping[str, MemberOffsets], members: Iterable[str]) -> dict[str, Mapping[Task, int]]:
    """Each member's reported offsets (TaskOffsets only), for the assignor: members' entries only."""
    return {m: table[m].offsets for m in members if m in table}
