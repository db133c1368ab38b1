"""Form KIP-848 groups over the wire and tell when they are STABLE.

`StabilityTracker` watches the members' own view (every member at the same member
epoch, owning together every partition of the subscribed topics) cheaply after every
response; `describe_groups` asks the coordinator (ConsumerGroupDescribe) to confirm that
the group is Stable at that assignment epoch.
"""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.errors import ErrorCode

from .client import KafkaConnection, MemberDriver
from .consumer_member import ConsumerMember
from .wire import CONSUMER_GROUP_DESCRIBE


class StabilityTracker:
    """Members' view of one group: STABLE when every member has the same epoch and the
    owned partitions add up to ``partitions`` (the coordinator never gives a partition
    to two members, so then every member owns its whole target)."""

    def __init__(self, members: Sequence[ConsumerMember], partitions: int) -> None:
        self.members = list(members)
        self.partitions = partitions
        self._epoch: dict[int, int] = {id(m): m.member_epoch for m in self.members}
        self._owned: dict[int, int] = {id(m): m.owned_count() for m in self.members}
        self.epochs = Counter(self._epoch.values())
        self.owned_total = sum(self._owned.values())
        self.stable_at: float | None = None
        self.stable_epoch = -1
        self.event = asyncio.Event()

    def observe(self, member: ConsumerMember, response: Any, now: float) -> None:
        key = id(member)
        old_epoch = self._epoch[key]
        if old_epoch != member.member_epoch:
            self.epochs[old_epoch] -= 1
            self.epochs[member.member_epoch] += 1
            self._epoch[key] = member.member_epoch
        owned = member.owned_count()
        self.owned_total += owned - self._owned[key]
        self._owned[key] = owned
        if self.is_stable():
            if self.stable_at is None or self.stable_epoch != member.member_epoch:
                self.stable_at, self.stable_epoch = now, member.member_epoch
                self.event.set()
        else:
            self.stable_at = None

    def is_stable(self) -> bool:
        n = len(self.members)
        if self.owned_total != self.partitions:
            return False
        epoch = next(iter(self._epoch.values()))
        return epoch > 0 and self.epochs[epoch] == n and all(m.joined and not m.ack_pending for m in self.members)


async def describe_groups(conn: KafkaConnection, group_ids: Sequence[str]) -> list[Any]:
    response = await conn.call(CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest(
        group_ids=tuple(group_ids), include_authorized_operations=False), timeout=60)
    for g in response.groups:
        if g.error_code != ErrorCode.none:
            raise RuntimeError(f"ConsumerGroupDescribe {g.group_id}: {g.error_code!r} {g.error_message}")
    return list(response.groups)


def confirmed_stable(described: Any, epoch: int | None = None) -> bool:
    """Stable per the coordinator, every member at the assignment epoch."""
    return (described.group_state == "Stable"
            and (epoch is None or described.assignment_epoch == epoch)
            and all(m.member_epoch == described.assignment_epoch for m in described.members))


async def form_groups(host: str, port: int, groups: dict[str, int], topics: tuple[str, ...], partitions: int,
                      members_per_connection: int = 100, timeout: float = 120.0
                      ) -> tuple[MemberDriver, list[KafkaConnection], dict[str, list[ConsumerMember]]]:
    """Join ``groups`` (group id -> member count) and wait until each is STABLE in the
    members' view and per ConsumerGroupDescribe. The driver keeps heartbeating."""
    by_group = {gid: [ConsumerMember(gid, topics) for _ in range(n)] for gid, n in groups.items()}
    trackers = {gid: StabilityTracker(ms, partitions) for gid, ms in by_group.items()}
    members = [m for ms in by_group.values() for m in ms]
    n_conns = max(1, -(-len(members) // members_per_connection))
    conns = [await KafkaConnection.open(host, port) for _ in range(n_conns)]
    driver = MemberDriver(conns, members, lambda m, r, now: trackers[m.group_id].observe(m, r, now))
    driver.start()
    deadline = time.monotonic() + timeout
    pending = set(by_group)
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"groups not STABLE after {timeout}s: {sorted(pending)[:5]}")
        await asyncio.sleep(0.2)
        # Every join bumps the group epoch once from 1 (KAFKA-20268): before epoch n + 1 a
        # settled-looking view is only the first joiner holding everything. Describing a
        # big group is costly for the coordinator, so it is asked only past that point.
        ready = [gid for gid in pending if trackers[gid].is_stable()
                 and trackers[gid].stable_epoch >= groups[gid] + 1]
        if ready:
            for described in await describe_groups(conns[0], ready):
                if confirmed_stable(described):
                    pending.discard(described.group_id)
    return driver, conns, by_group
