"""An asyncio driver for `ConsumerMember`: the sockets and the clock around the
sans-IO member.

Rules:
- One connection to the group coordinator (found with FindCoordinator v4 through the
  bootstrap address), one request at a time: the member never has two heartbeats in
  flight, and Prepare/Install run between heartbeats.
- The application's callbacks (`Listener`) are awaited before the member is told
  (`revoked()`/`assigned()`): a revoked partition's offsets are committed before the
  coordinator hears it was released (KIP-848's revoke-before-assign). Heartbeats go on
  meanwhile, so a slow callback does not cost the member its session.
- A request that fails (connection lost, no answer within `request_timeout_ms`) is
  retried after the member's backoff on a new connection to a freshly found coordinator.
- `stop` (an asyncio.Event) makes the member leave the group, revoking first. Cancelling
  `run()` sends nothing: to the coordinator it is a crash, the session timeout ends it.
- The loop itself is members/_loop.py, shared with the connect worker's driver; this
  module names the member's vocabulary and does the member's Prepare/Install.
"""
from __future__ import annotations

import operator

from ._loop import IO_ERRORS, Connection, DriverLoop, MemberFatal, Vocabulary
from .assignor import Partitions
from .consumer import Assign, Compute, ConsumerMember, Fatal, Lost, Rediscover, Revoke, State

__all__ = ["Connection", "Listener", "MemberDriver", "MemberFatal"]


class Listener:
    """The application's side; override what you need (each awaited before the member
    reports it to the coordinator)."""

    async def on_revoke(self, partitions: Partitions) -> None: ...

    async def on_assign(self, partitions: Partitions) -> None: ...

    async def on_lost(self, partitions: Partitions) -> None: ...


class MemberDriver(DriverLoop):
    vocabulary = Vocabulary(Revoke, Assign, Lost, Compute, Rediscover, Fatal, leaving=State.LEAVING,
                            left=State.LEFT, payload=operator.attrgetter("partitions"))

    def __init__(self, member: ConsumerMember, bootstrap: str, listener: Listener | None = None, *,
                 client_id: str = "kcoord-members", request_timeout_ms: int = 10_000) -> None:
        super().__init__(member, bootstrap, listener or Listener(), client_id=client_id,
                         request_timeout_ms=request_timeout_ms)
        self.member = member

    async def _compute(self) -> None:
        """Prepare, assign, Install (docs/design/client-assignors-spec.md). Any failure abandons the computation: the
        coordinator re-asks (this member or another) on its own."""
        try:
            install = self.member.on_prepare(await self._call(self.member.prepare_request()))
            if install is not None:
                await self._call(install)
        except IO_ERRORS:
            await self._drop()
