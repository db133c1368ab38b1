"""When the membership heartbeats (ClusterMembership's part, as Kafka's consumer keeps a
`Heartbeat` timer beside its coordinator): the interval, a rejoin asked for between two
heartbeats, and the side heartbeats that keep a dynamic member's lease while its JoinGroup
and SyncGroup are held.

Rules:
- a static member heartbeats every `heartbeat_ms`; a dynamic one at least six times a
  session: Tansu holds the leader's JoinGroup for session/2 and then completes the generation
  with the metadata each member last sent (Controller::join, administrator.rs:924), so every
  member must see REBALANCE_IN_PROGRESS and rejoin well inside that window;
- a requested rejoin cuts the current interval short;
- a side heartbeat answered NONE or REBALANCE_IN_PROGRESS proves the member is still in the
  group: it renews the lease, timed from when it was sent; any failure only ends the side
  heartbeats (the join itself decides).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from .lease import Lease
from .upstream import Link, OpenLink

log = logging.getLogger("kcoord.cluster")


class Heartbeat:
    def __init__(self, heartbeat_ms: int, session_ms: int) -> None:
        self.heartbeat_ms = heartbeat_ms
        self.session_ms = session_ms
        self.rejoin_requested = False
        self._wake = asyncio.Event()      # cuts the heartbeat interval short (a rejoin requested)

    def interval_ms(self, static: bool) -> float:
        return self.heartbeat_ms if static else min(self.heartbeat_ms, self.session_ms / 6)

    def request_rejoin(self) -> None:
        self.rejoin_requested = True
        self._wake.set()

    async def next(self, static: bool) -> bool:
        """Wait one interval (or less, for a requested rejoin); True: rejoin now."""
        try:
            await asyncio.wait_for(self._wake.wait(), self.interval_ms(static) / 1000)
        except TimeoutError:
            pass
        self._wake.clear()
        rejoin, self.rejoin_requested = self.rejoin_requested, False
        return rejoin


async def side_heartbeats(open_link: OpenLink, coordinator: tuple[str, int], interval_s: float,
                          request: Callable[[], Any], lease: Lease, now_ms: Callable[[], float],
                          timeout: float, instance_id: str) -> None:
    """Heartbeat on a link of its own until cancelled, renewing ``lease`` on each proof of
    membership (``request()`` builds each Heartbeat with the generation of the moment)."""
    link: Link | None = None
    try:
        link = await open_link([coordinator])
        while True:
            await asyncio.sleep(interval_s)
            sent = now_ms()
            resp = await link.request(request(), timeout)
            if resp.error_code in (ErrorCode.none, ErrorCode.rebalance_in_progress):
                lease.renew(sent)
    except asyncio.CancelledError:
        raise
    except Exception as e:     # the join itself decides; this only keeps the lease
        log.debug("cluster membership %s: heartbeat during the rebalance failed: %s", instance_id, e)
    finally:
        if link is not None:
            link.close()
