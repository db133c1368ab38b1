"""The side heartbeats a dynamic member sends while its JoinGroup/SyncGroup are held
(coordinator/cluster/heartbeat.py): they renew the lease on each proof of membership, and
`stop()` ends them even when the cancellation is dropped by `asyncio.wait_for` (Python 3.11
returns the result of an operation that completed in the loop iteration of the cancel), the
way the upstream link's connect and request wait. A stopped side heartbeat renews nothing.
No clock: the interval is 0 and the lease is given the times."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kio.schema.errors import ErrorCode

from coordinator.cluster.heartbeat import SideHeartbeats
from coordinator.cluster.lease import Lease


class Link:
    """Answers each request when the test resolves its future; waits as UpstreamClient does
    (asyncio.wait_for), which is where a cancellation can be dropped."""

    def __init__(self) -> None:
        self.answers: list[asyncio.Future] = []
        self.closed = False

    async def request(self, request, timeout=None):
        answer = asyncio.get_running_loop().create_future()
        self.answers.append(answer)
        return await asyncio.wait_for(answer, 5)

    def close(self) -> None:
        self.closed = True


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _side(lease: Lease, open_link, now: list[float]) -> SideHeartbeats:
    return SideHeartbeats(open_link, ("127.0.0.1", 1), 0, lambda: SimpleNamespace(), lease, lambda: now[0],
                          5, "solo-1")


def _answer(code: ErrorCode) -> SimpleNamespace:
    return SimpleNamespace(error_code=code)


async def test_proofs_of_membership_renew_the_lease_from_when_they_were_sent():
    lease, link, now = Lease(3_000, 1_000), Link(), [1_000.0]

    async def open_link(addresses):
        return link

    side = _side(lease, open_link, now)
    await _settle()
    now[0] = 1_500.0                  # the answer arrives later than the send
    link.answers[-1].set_result(_answer(ErrorCode.rebalance_in_progress))
    await _settle()
    assert lease.renewed_ms == 1_000.0
    link.answers[-1].set_result(_answer(ErrorCode.unknown_member_id))
    await _settle()
    assert lease.renewed_ms == 1_000.0, "no proof: no renewal"
    await asyncio.wait_for(side.stop(), 5)
    assert link.closed


async def test_a_cancel_dropped_while_the_link_opens_still_stops_them():
    lease, link, now = Lease(3_000, 1_000), Link(), [1_000.0]
    opened = asyncio.get_running_loop().create_future()

    async def open_link(addresses):
        return await asyncio.wait_for(opened, 5)

    side = _side(lease, open_link, now)
    await _settle()
    opened.set_result(link)           # connected in the same loop iteration as the stop
    await asyncio.wait_for(side.stop(), 5)
    await _settle()
    assert link.answers == [], "no heartbeat once stopped"
    assert link.closed


async def test_an_answer_arriving_with_the_stop_renews_nothing():
    """The join dropped the lease (a lost membership) and then stopped the side heartbeats:
    their answer of that moment must not bring the lease back."""
    lease, link, now = Lease(3_000, 1_000), Link(), [1_000.0]

    async def open_link(addresses):
        return link

    side = _side(lease, open_link, now)
    await _settle()
    lease.drop()
    link.answers[-1].set_result(_answer(ErrorCode.rebalance_in_progress))
    await asyncio.wait_for(side.stop(), 5)
    await _settle()
    assert lease.renewed_ms is None
    assert len(link.answers) == 1, "no heartbeat once stopped"
