"""Classic group members (JoinGroup / SyncGroup / Heartbeat), for brokers without KIP-848.

`form_classic_group` brings ``n`` members into one group the way a consumer does: every
member sends JoinGroup (v4+ answers the first one with MEMBER_ID_REQUIRED and a member
id, and the member joins again with it), the leader computes nothing (the assignments
are empty; no broker looks inside them) and every member sends SyncGroup. Each member
uses its own connection while joining: a broker holds a JoinGroup until the rebalance
completes (Tansu ~session timeout / 2) and may serve one connection's requests in order.
"""
from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass
from datetime import timedelta

from kio.schema.errors import ErrorCode
from kio.schema.join_group.v7.request import JoinGroupRequestProtocol
from kio.schema.sync_group.v5.request import SyncGroupRequestAssignment

from .client import KafkaConnection
from .wire import HEARTBEAT, JOIN_GROUP, SYNC_GROUP, FrameTemplate, build_request

JOIN_VERSION = 7
SYNC_VERSION = 5
HEARTBEAT_VERSION = 4
# ConsumerProtocolAssignment v0: no partitions, null user data.
EMPTY_ASSIGNMENT = struct.pack(">hii", 0, 0, -1)


@dataclass(slots=True)
class ClassicMember:
    group_id: str
    member_id: str
    generation_id: int

    def heartbeat_template(self) -> FrameTemplate:
        return FrameTemplate.of(HEARTBEAT, HEARTBEAT_VERSION, build_request(
            HEARTBEAT, HEARTBEAT_VERSION, group_id=self.group_id, generation_id=self.generation_id,
            member_id=self.member_id, group_instance_id=None))


def consumer_subscription(topics: tuple[str, ...]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = [struct.pack(">hi", 0, len(topics))]
    for t in topics:
        raw = t.encode()
        out.append(struct.pack(">h", len(raw)) + raw)
    out.append(struct.pack(">i", -1))
    return b"".join(out)


async def _join(conn: KafkaConnection, group_id: str, topics: tuple[str, ...], session_timeout_ms: int,
                member_id: str = ""):
    metadata = consumer_subscription(topics)
    for _ in range(3):
        request = build_request(
            JOIN_GROUP, JOIN_VERSION, group_id=group_id, session_timeout=timedelta(milliseconds=session_timeout_ms),
            rebalance_timeout=timedelta(milliseconds=max(session_timeout_ms, 3000)), member_id=member_id,
            group_instance_id=None, protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=metadata),))
        response = await conn.call(JOIN_GROUP, JOIN_VERSION, request, timeout=120)
        if response.error_code == ErrorCode.member_id_required:
            member_id = response.member_id
            continue
        if response.error_code != ErrorCode.none:
            raise RuntimeError(f"JoinGroup {group_id}: {response.error_code!r}")
        return response
    raise RuntimeError(f"JoinGroup {group_id}: no member id after 3 attempts")


async def _sync(conn: KafkaConnection, group_id: str, join, all_ids: list[str]):
    assignments = tuple(SyncGroupRequestAssignment(member_id=m, assignment=EMPTY_ASSIGNMENT) for m in all_ids) \
        if join.member_id == join.leader else ()
    return await conn.call(SYNC_GROUP, SYNC_VERSION, build_request(
        SYNC_GROUP, SYNC_VERSION, group_id=group_id, generation_id=join.generation_id, member_id=join.member_id,
        group_instance_id=None, protocol_type="consumer", protocol_name=join.protocol_name,
        assignments=assignments), timeout=120)


async def _member(conn: KafkaConnection, group_id: str, topics: tuple[str, ...], session_timeout_ms: int,
                  member_id: str = "") -> ClassicMember:
    """Join and sync until the sync succeeds (a consumer rejoins on REBALANCE_IN_PROGRESS)."""
    for _ in range(20):
        join = await _join(conn, group_id, topics, session_timeout_ms, member_id)
        member_id = join.member_id
        response = await _sync(conn, group_id, join, [m.member_id for m in join.members])
        if response.error_code == ErrorCode.none:
            return ClassicMember(group_id, member_id, join.generation_id)
        if response.error_code != ErrorCode.rebalance_in_progress:
            raise RuntimeError(f"SyncGroup {group_id}/{member_id}: {response.error_code!r}")
    raise RuntimeError(f"group {group_id}: member {member_id} did not settle after 20 rebalances")


async def _heartbeat_ok(conn: KafkaConnection, m: ClassicMember) -> bool:
    response = await conn.call(HEARTBEAT, HEARTBEAT_VERSION, build_request(
        HEARTBEAT, HEARTBEAT_VERSION, group_id=m.group_id, generation_id=m.generation_id,
        member_id=m.member_id, group_instance_id=None))
    return response.error_code == ErrorCode.none


async def form_classic_group(host: str, port: int, group_id: str, n: int, topics: tuple[str, ...],
                             session_timeout_ms: int = 6000) -> list[ClassicMember]:
    """``n`` members in one generation, each answered NONE by a Heartbeat."""
    conns = [await KafkaConnection.open(host, port) for _ in range(n)]
    try:
        members = list(await asyncio.gather(*(_member(c, group_id, topics, session_timeout_ms) for c in conns)))
        for _ in range(20):
            ok = await asyncio.gather(*(_heartbeat_ok(c, m) for c, m in zip(conns, members)))
            if all(ok) and len({m.generation_id for m in members}) == 1:
                return members
            # A rebalance started after some members synced: every member rejoins, as
            # their next heartbeat would tell them to.
            members = list(await asyncio.gather(*(
                _member(c, group_id, topics, session_timeout_ms, m.member_id) for c, m in zip(conns, members))))
        raise RuntimeError(f"group {group_id}: no stable generation after 20 rounds")
    finally:
        for c in conns:
            c.close()
