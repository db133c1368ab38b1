"""What the membership group's leader does with a JoinGroup answer (ClusterMembership's
part): read every member's metadata, balance the shards (balancer.py), encode one
assignment per member for its SyncGroup.

Rule: a member whose metadata cannot be read is logged and gets no shards; it cannot stop
the others' rebalance. Every member listed gets an assignment (an empty one at least).
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kio.schema.sync_group.v3 import request as sync_v3

from .balancer import balance
from .protocol import Assignment, MalformedMembershipData, MemberMetadata, decode_metadata, encode_assignment

log = logging.getLogger("kcoord.cluster")


def lead(instance_id: str, generation: int, n_shards: int, members: Iterable[Any],
         previous: Mapping[int, str] | None) -> tuple[sync_v3.SyncGroupRequestAssignment, ...]:
    """The SyncGroup assignments for ``members`` (JoinGroup's member list), led by ``instance_id``."""
    members = tuple(members)
    metadata: dict[str, MemberMetadata] = {}
    for m in members:
        try:
            metadata[m.member_id] = decode_metadata(m.metadata)
        except MalformedMembershipData as e:
            log.error("cluster membership: member %s sent unreadable metadata (%s); it gets no shards",
                      m.member_id, e)
    result = balance(generation, n_shards, metadata, previous)
    log.info("cluster membership %s leads generation %d: %d instances, %d shards moving%s", instance_id,
             generation, len(metadata), result.moved, " (follow-up rebalance)" if result.follow_up else "")
    empty = encode_assignment(Assignment(generation, frozenset()))
    return tuple(sync_v3.SyncGroupRequestAssignment(
        member_id=m.member_id, assignment=encode_assignment(result.assignments[m.member_id])
        if m.member_id in result.assignments else empty) for m in members)
