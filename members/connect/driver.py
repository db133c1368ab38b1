"""An asyncio driver for `ConnectWorker` (docs/design/connect-groups-spec.md): the sockets and the clock
around the sans-IO worker. The loop is members/_loop.py, shared with the consumer member's
driver (members/driver.py); this module names the worker's vocabulary and does the
worker's Prepare/Install.

Rules:
- One connection to the group coordinator (FindCoordinator v4 through the bootstrap
  address; members._loop.Connection, which decodes the private keys 32703-32706), one
  request at a time: never two heartbeats in flight, Prepare/Install between heartbeats.
- The application's callbacks (`WorkerListener`) are awaited before the worker is told
  (`revoked()`/`assigned()`): a unit is stopped before the coordinator hears it was
  released, so it never runs on two workers (the seed's revoke-before-assign, 001:L398).
  Heartbeats go on meanwhile, so a slow start or stop does not cost the worker its session.
- A request that fails (connection lost, no answer within `request_timeout_ms`) is retried
  after the worker's backoff on a new connection to a freshly found coordinator.
- `stop` (an asyncio.Event) makes the worker leave, revoking first. Cancelling `run()`
  sends nothing: to the coordinator it is a crash (C11's kill), the session timeout ends it.
- `describe()` sends ConnectGroupDescribe (32706) for this worker's group.
"""
from __future__ import annotations

import operator

from coordinator.protocol import connect_messages as cm
from members._loop import IO_ERRORS, DriverLoop, MemberFatal, Vocabulary, now_ms

from .assignor import Unit
from .worker import Assign, Compute, ConnectWorker, Fatal, Lost, Rediscover, Revoke, State

__all__ = ["ConnectDriver", "MemberFatal", "WorkerListener"]


class WorkerListener:
    """The application's side; override what you need (each awaited before the worker
    reports it to the coordinator)."""

    async def on_revoke(self, units: frozenset[Unit]) -> None: ...

    async def on_assign(self, units: frozenset[Unit]) -> None: ...

    async def on_lost(self, units: frozenset[Unit]) -> None: ...


class ConnectDriver(DriverLoop):
    vocabulary = Vocabulary(Revoke, Assign, Lost, Compute, Rediscover, Fatal, leaving=State.LEAVING,
                            left=State.LEFT, payload=operator.attrgetter("units"))

    def __init__(self, worker: ConnectWorker, bootstrap: str, listener: WorkerListener | None = None, *,
                 client_id: str = "kcoord-connect", request_timeout_ms: int = 10_000) -> None:
        super().__init__(worker, bootstrap, listener or WorkerListener(), client_id=client_id,
                         request_timeout_ms=request_timeout_ms)
        self.worker = worker

    async def describe(self) -> cm.ConnectGroupDescribeResponse:
        return await self._call(cm.ConnectGroupDescribeRequest(group_ids=(self.worker.group_id,)))

    async def _compute(self) -> None:
        """Prepare, assign, Install (the connect group on the client-side assignors' engine). Any failure abandons the
        computation: the coordinator asks again (this worker or another) on its own."""
        w = self.worker
        try:
            install = w.on_prepare(await self._call(w.prepare_request()), now_ms())
            if install is not None:
                w.on_install(await self._call(install), now_ms())
        except IO_ERRORS:
            await self._drop()
