"""A classic group member driven by raw requests (JoinGroup v9, SyncGroup v5, Heartbeat v4,
LeaveGroup v5, the "consumer" protocol type), recording plain responses in a Transcript with
server-generated member ids replaced by aliases; shared by the classic and migration tests."""
from __future__ import annotations

import struct
from datetime import timedelta

from support.differential import (
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    SYNC_GROUP,
    Transcript,
    describe_groups,
    plain,
)
from support.wait import wait_until


def subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)


class ClassicMember:
    """One member; ``instance_id`` makes it a static member (KIP-345)."""

    def __init__(self, t: Transcript, group: str, topic: str, instance_id: str | None = None) -> None:
        self.t, self.group, self.topic, self.instance_id = t, group, topic, instance_id
        self.member_id, self.generation = "", -1

    def join(self) -> dict:
        t = self.t.side.types(JOIN_GROUP, 9)
        response = self.t.side.call(
            JOIN_GROUP, 9, group_id=self.group, session_timeout=timedelta(seconds=10),
            rebalance_timeout=timedelta(seconds=10), member_id=self.member_id, group_instance_id=self.instance_id,
            protocol_type="consumer", reason=None,
            protocols=(t.JoinGroupRequestProtocol(name="range", metadata=subscription(self.topic)),))
        self.member_id = response.member_id or self.member_id
        self.generation = response.generation_id
        return self.view(response)

    def view(self, response) -> dict:
        out = plain(response)
        for key in ("member_id", "leader"):
            if key in out:
                out[key] = self.t.alias(out[key])
        if "members" in out:
            out["members"] = sorted(({**m, "member_id": self.t.alias(m["member_id"])} for m in out["members"]),
                                    key=lambda m: m["member_id"])
        return out

    def sync(self, assignments: dict[str, bytes] | None = None) -> dict:
        t = self.t.side.types(SYNC_GROUP, 5)
        return self.view(self.t.side.call(
            SYNC_GROUP, 5, group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance_id, protocol_type="consumer", protocol_name="range",
            assignments=tuple(t.SyncGroupRequestAssignment(member_id=m, assignment=a)
                              for m, a in (assignments or {}).items())))

    def heartbeat(self, generation: int | None = None, member_id: str | None = None) -> dict:
        return self.view(self.t.side.call(
            HEARTBEAT, 4, group_id=self.group, generation_id=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id, group_instance_id=self.instance_id))

    def leave(self) -> dict:
        t = self.t.side.types(LEAVE_GROUP, 5)
        return self.view(self.t.side.call(LEAVE_GROUP, 5, group_id=self.group, members=(
            t.MemberIdentity(member_id=self.member_id, group_instance_id=self.instance_id, reason="done"),)))


def described(t: Transcript, group: str) -> dict:
    out = describe_groups(t.side, group)
    out["members"] = sorted(({**m, "member_id": t.alias(m["member_id"])} for m in out["members"]),
                            key=lambda m: m["member_id"])
    return out


def wait_rebalance(member: ClassicMember) -> dict:
    return wait_until(lambda: (r := member.heartbeat())["error_code"] != "none" and r, 10, 0.1,
                      "the heartbeat to report the rebalance")
