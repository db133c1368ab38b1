"""Reconcile a worker towards its target with the consumer groups' builder, unchanged.

Rule (docs/design/connect-groups-spec.md §2): a worker's units {connector: {task: epoch}} have the shape of
a consumer member's partitions {topic: {partition: epoch}}, so
`reconciliation.CurrentAssignmentBuilder` (Kafka 4.3's `CurrentAssignmentBuilder`) runs on
them as they are: a unit leaves its worker first (UNREVOKED), and is given to the next
one only once released (UNRELEASED), so no unit ever has two owners (001:L123-127; L125's
"intersection" is what the worker is told while it revokes). The only difference is that
a worker "subscribes" to every connector: nothing is filtered out of its target.

When the worker reaches the target's epoch it takes the target's error, metadata version
and bytes (docs/design/client-assignors-spec.md §3: the assigner's per-worker Connect assignment).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, cast

from ..group import MemberState
from ..reconciliation import CurrentAssignmentBuilder
from .group import ConnectGroup, ConnectMember, ConnectTarget


@dataclass(slots=True)
class _Worker:
    """A worker as the builder reads it: the consumer member's field names, units for partitions."""
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned_partitions: Any
    partitions_pending_revocation: Any


def reconcile(group: ConnectGroup, m: ConnectMember, target_epoch: int, target: ConnectTarget,
              owned: dict[str, frozenset[int]] | None) -> ConnectMember:
    # The builder is typed for topic ids; connector names key the same dicts.
    proxy = _Worker(m.member_id, m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation)
    connectors = frozenset(target.units) | frozenset(m.assigned) | frozenset(m.pending_revocation)
    built = CurrentAssignmentBuilder(
        proxy, target_epoch=target_epoch, target=cast(Any, target.units), subscribed_topic_ids=cast(Any, connectors),
        partition_epoch=cast(Any, group.unit_epoch), owned=cast(Any, owned)).build()
    out = replace(m, member_epoch=built.member_epoch, previous_member_epoch=built.previous_member_epoch,
                  state=built.state, assigned=cast(Any, built.assigned_partitions),
                  pending_revocation=cast(Any, built.partitions_pending_revocation))
    if out.member_epoch == target_epoch:
        out = replace(out, error=group.assignment_error, metadata_version=target.version, metadata=target.metadata)
    return out
