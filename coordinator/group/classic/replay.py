"""Replay of the classic group's record (GroupMetadata, type 2): the only way a ClassicGroup
is rebuilt from the log (Kafka: `GroupMetadataManager.replay(GroupMetadataKey, ...)`).

Rules: the value is the whole group (a STABLE group with its members, or EMPTY); its
tombstone deletes a classic group and nothing else. `REPLAY_RULES` goes to the shard's
registry through the classic contribution (contribution.py).
"""
from __future__ import annotations

import logging

from records import GroupMetadataKey

from ..group_types import ReplayRule, group_type
from ..replay import Replayer
from .group import ClassicGroup, ClassicGroupMember, ClassicGroupState

log = logging.getLogger("kcoord.replay")


def _group_metadata(replayer: Replayer, key, value, offset: int, producer_id: int) -> None:
    group_id = key.group
    if value is None:
        existing = replayer.groups.get(group_id)
        if isinstance(existing, ClassicGroup):
            del replayer.groups[group_id]
        return
    state = ClassicGroupState.STABLE if value.members else ClassicGroupState.EMPTY
    group = ClassicGroup(group_id, state, value.current_state_timestamp)
    group.protocol_type = value.protocol_type
    for mm in value.members:
        group.add(ClassicGroupMember(
            member_id=mm.member_id, group_instance_id=mm.group_instance_id,
            client_id=mm.client_id, client_host=mm.client_host,
            # A record without a rebalance timeout (v0) means "the session timeout".
            rebalance_timeout_ms=mm.rebalance_timeout if mm.rebalance_timeout != -1 else mm.session_timeout,
            session_timeout_ms=mm.session_timeout, protocol_type=value.protocol_type,
            supported_protocols=[(value.protocol or "", mm.subscription)], assignment=mm.assignment))
    group.protocol_type = value.protocol_type
    group.protocol_name = value.protocol
    group.generation_id = value.generation
    group.leader_id = value.leader
    existing = replayer.groups.get(group_id)
    if existing is not None and existing.__class__ is not ClassicGroup and not existing.is_empty():
        # A downgrade tombstones the consumer group first; compaction can drop those
        # tombstones. The later classic record wins (see group_as).
        log.warning("group %s: classic GroupMetadata replaces a %s group (compacted conversion)",
                    group_id, group_type(existing).name)
    replayer.groups[group_id] = group


REPLAY_RULES: dict[type, ReplayRule] = {GroupMetadataKey: _group_metadata}
