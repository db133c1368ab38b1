"""An asyncio driver for `ConnectWorker` (issue 18, seed 001): the sockets and the clock
around the sans-IO worker, on the model of members/driver.py (the consumer member's).

Rules:
- One connection to the group coordinator (FindCoordinator v4 through the bootstrap
  address; members.driver.Connection, which decodes the private keys 32703-32706), one
  request at a time: never two heartbeats in flight, Prepare/Install between heartbeats.
- The application's callbacks (`WorkerListener`) are awaited before the worker is told
  (`revoked()`/`assigned()`): a unit is stopped before the coordinator hears it was
  released, so it never runs on two workers (the seed's revoke-before-assign, 001:L398).
- A request that fails (connection lost, no answer within `request_timeout_ms`) is retried
  after the worker's backoff on a new connection to a freshly found coordinator.
- `stop` (an asyncio.Event) makes the worker leave, revoking first. Cancelling `run()`
  sends nothing: to the coordinator it is a crash (C11's kill), the session timeout ends it.
- `describe()` sends ConnectGroupDescribe (32706) for this worker's group.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.static.primitive import i8

from coordinator.protocol import connect_messages as cm
from members.driver import Connection, MemberFatal

from .assignor import Unit
from .worker import Assign, Compute, ConnectWorker, Fatal, Lost, Rediscover, Revoke, State

__all__ = ["ConnectDriver", "MemberFatal", "WorkerListener"]

_IO_ERRORS = (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError)


class WorkerListener:
    """The application's side; override what you need (each awaited before the worker
    reports it to the coordinator)."""

    async def on_revoke(self, units: frozenset[Unit]) -> None: ...

    async def on_assign(self, units: frozenset[Unit]) -> None: ...

    async def on_lost(self, units: frozenset[Unit]) -> None: ...


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class ConnectDriver:
    def __init__(self, worker: ConnectWorker, bootstrap: str, listener: WorkerListener | None = None, *,
                 client_id: str = "kcoord-connect", request_timeout_ms: int = 10_000) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.bootstrap = (host, int(port))
        self.worker = worker
        self.listener = listener or WorkerListener()
        self.client_id = client_id
        self.timeout = request_timeout_ms / 1000
        self.conn: Connection | None = None

    async def _coordinator(self) -> Connection:
        if self.conn is None:
            boot = await Connection.open(*self.bootstrap, self.client_id)
            try:
                found = await asyncio.wait_for(boot.call(FindCoordinatorRequest(
                    key_type=i8(0), coordinator_keys=(self.worker.group_id,))), self.timeout)
            finally:
                await boot.close()
            c = found.coordinators[0]
            if c.error_code != 0:
                raise ConnectionError(f"FindCoordinator for {self.worker.group_id}: {c.error_code} {c.error_message}")
            self.conn = await Connection.open(c.host, c.port, self.client_id)
        return self.conn

    async def _drop(self) -> None:
        if self.conn is not None:
            await self.conn.close()
            self.conn = None

    async def _call(self, request: Any) -> Any:
        conn = await self._coordinator()
        return await asyncio.wait_for(conn.call(request), self.timeout)

    async def describe(self) -> cm.ConnectGroupDescribeResponse:
        return await self._call(cm.ConnectGroupDescribeRequest(group_ids=(self.worker.group_id,)))

    async def run(self, stop: asyncio.Event) -> None:
        """Heartbeat until `stop` is set (then leave) or a fatal error (MemberFatal)."""
        w = self.worker
        try:
            while w.state is not State.LEFT:
                if stop.is_set() and w.state is not State.LEAVING:
                    await self._handle(w.leave(_now_ms()))
                request = w.poll(_now_ms())
                if request is not None:
                    try:
                        response = await self._call(request)
                    except _IO_ERRORS:
                        await self._drop()
                        w.request_failed(_now_ms())
                    else:
                        await self._handle(w.on_heartbeat(response, _now_ms()))
                    continue
                # next_poll_ms includes the due Reason of a held-back assignment (KIP-415 delay)
                wait = max(0, w.next_poll_ms - _now_ms()) / 1000
                if stop.is_set():
                    await asyncio.sleep(wait)
                else:
                    try:
                        await asyncio.wait_for(stop.wait(), timeout=wait)   # woken early to leave
                    except TimeoutError:
                        pass
        finally:
            await self._drop()

    async def _handle(self, actions: list[Any]) -> None:
        w = self.worker
        while actions:
            action = actions.pop(0)
            if isinstance(action, Revoke):
                await self.listener.on_revoke(action.units)
                actions.extend(w.revoked(_now_ms()))
            elif isinstance(action, Assign):
                await self.listener.on_assign(action.units)
                actions.extend(w.assigned(_now_ms()))
            elif isinstance(action, Lost):
                await self.listener.on_lost(action.units)
            elif isinstance(action, Compute):
                await self._compute()
            elif isinstance(action, Rediscover):
                await self._drop()
            elif isinstance(action, Fatal):
                raise MemberFatal(action.error_code, action.message)

    async def _compute(self) -> None:
        """Prepare, assign, Install (seed 001 on seed 000's engine). Any failure abandons the
        computation: the coordinator asks again (this worker or another) on its own."""
        w = self.worker
        try:
            install = w.on_prepare(await self._call(w.prepare_request()), _now_ms())
            if install is not None:
                w.on_install(await self._call(install), _now_ms())
        except _IO_ERRORS:
            await self._drop()
