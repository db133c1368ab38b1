"""A consumer group's side of a client-side assignment round (modern/client_assignment.py has
the rules): what Prepare shows the assigner, and the records an Install writes
(docs/design/client-assignors-spec.md §2, §6). A connect group has its own
(modern/connect/assignment.py).
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ... import record_helpers as rh
from ...image import MetadataImage
from ..client_assignment import Assignment, Installed, PreparedGroup, PreparedMember, Snapshot, Specs, spec_for
from .group import ConsumerGroup
from .membership import member_topic_ids

if TYPE_CHECKING:
    from records import CoordinatorRecord


def prepare_view(group: ConsumerGroup, image: MetadataImage, lists: Mapping[str, Specs], assignor: str
                 ) -> PreparedGroup:
    """The group at its current group epoch as the assigner sees it: every member's
    resolved subscription (topic ids), its entry for `assignor`, its current target, and
    the partition counts of every subscribed topic that exists."""
    members = []
    subscriptions: dict[str, frozenset[uuid.UUID]] = {}
    for member_id in sorted(group.members):
        m = group.members[member_id]
        topic_ids = member_topic_ids(group, image, m)
        subscriptions[member_id] = topic_ids
        target = group.target_assignment.get(member_id) or {}
        members.append(PreparedMember(
            member_id, m.member_epoch, m.instance_id, m.rack_id, tuple(sorted(topic_ids, key=str)),
            spec_for(lists[member_id], assignor), {t: frozenset(ps) for t, ps in target.items() if ps}))
    partitions: dict[uuid.UUID, int] = {}
    names: dict[uuid.UUID, str] = {}
    for topic_id in sorted(set().union(*subscriptions.values()), key=str):
        t = image.topics_by_id.get(topic_id)
        if t is not None:
            partitions[topic_id], names[topic_id] = t.num_partitions, t.name
    return PreparedGroup(Snapshot(group.group_epoch, assignor, subscriptions, partitions), tuple(members), names)


def installed_records(group: ConsumerGroup, done: Installed, now_ms: int) -> list[CoordinatorRecord]:
    """The records of a completed round, on Kafka's own record types (6, 7): a target
    record for each member whose target changed, then the target metadata at the
    prepared epoch E (000:L199). With Error != 0 only the metadata: targets stay, the
    epoch still advances (000:L274-276). Members that left are absent from `done`.
    Without the client-assignor tags: the shard writes them with client_mode.install_assignment,
    which adds the per-member metadata and the error (tags >= 1000, docs/design/client-assignors-spec.md §6)."""
    gid = group.group_id
    records = [rh.target_member_record(gid, m, target) for m, target in sorted(done.targets.items())
               if _norm(group.target_assignment.get(m) or {}) != _norm(target)]
    records.append(rh.target_metadata_record(gid, done.epoch, now_ms))
    return records


def _norm(a: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in a.items() if ps}


# ------------------------------------------------------------------ in flight
