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
  heartbeats (the join itself decides);
- the side heartbeats end when the join ends (`stop()`), by a flag checked after every wait,
  not by cancellation alone: on Python 3.11 `asyncio.wait_for` drops a cancellation that
  arrives in the loop iteration where the awaited operation completes (CPython gh-86296,
  fixed in 3.12). The upstream link waited that way until it moved to `aio.within`, and
  a link is any `OpenLink`. A dropped cancel left them running and the join waiting on them
  forever (seen): the member heartbeated on the side link without ever rejoining, so Kafka
  held the next rebalance for its whole timeout and then removed it (Tansu formed the group
  with its old metadata), while its side heartbeats kept renewing its lease. Stopped, they
  renew nothing: the join may have dropped the lease (a lost membership) before it stopped
  them, and a late answer must not bring it back.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from ..aio import within
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
            await within(self._wake.wait(), self.interval_ms(static) / 1000)   # keeps the membership's cancel
        except TimeoutError:
            pass
        self._wake.clear()
        rejoin, self.rejoin_requested = self.rejoin_requested, False
        return rejoin


class SideHeartbeats:
    """Heartbeats on a link of their own from construction until `stop()`, renewing ``lease``
    on each proof of membership (``request()`` builds each Heartbeat with the generation of
    the moment)."""

    def __init__(self, open_link: OpenLink, coordinator: tuple[str, int], interval_s: float,
                 request: Callable[[], Any], lease: Lease, now_ms: Callable[[], float], timeout: float,
                 instance_id: str) -> None:
        self._open_link = open_link
        self._coordinator = coordinator
        self._interval_s = interval_s
        self._request = request
        self._lease = lease
        self._now_ms = now_ms
        self._timeout = timeout
        self._instance_id = instance_id
        self.stopped = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kcoord-cluster-side-hb")

    async def stop(self) -> None:
        """End them and wait until they have (the flag ends them even if the cancel is dropped)."""
        self.stopped = True
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        link: Link | None = None
        try:
            link = await self._open_link([self._coordinator])
            while not self.stopped:
                await asyncio.sleep(self._interval_s)
                if self.stopped:
                    break
                sent = self._now_ms()
                resp = await link.request(self._request(), self._timeout)
                log.debug("cluster membership %s: side Heartbeat -> %s%s", self._instance_id, resp.error_code.name,
                          " (the join ended: not counted)" if self.stopped else "")
                if self.stopped:
                    break
                if resp.error_code in (ErrorCode.none, ErrorCode.rebalance_in_progress):
                    self._lease.renew(sent)
        except asyncio.CancelledError:
            raise
        except Exception as e:     # the join itself decides; this only keeps the lease
            log.debug("cluster membership %s: heartbeat during the rebalance failed: %s", self._instance_id, e)
        finally:
            if link is not None:
                link.close()
