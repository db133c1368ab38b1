"""A plain `kcoord serve`'s lease (one process, fencing none, watched by clustered.SoloWatch):
when it may answer from its shards and send a write, and the state log that asks before
each send. No I/O here; duck-typed (the shell hands in the membership and the state log).

Rules (docs/user/cluster.md, "One process refuses company" and the safety argument):
- Once its watch's membership group admitted it (the candidate check's verdict, or a later
  one), the process holds the watch's lease exactly as a cluster member holds its own
  (lease.py): it answers and writes only while the lease holds and the group knows it as
  the process that serves (it is not a candidate).
- A watcher that let its lease run out (a pause, a partition) or that the group dropped
  (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION) is a candidate again (membership.py): another
  plain serve may have been admitted meanwhile. It answers nothing until the group admits
  it again, and then only once every shard was reloaded from the log (`reloading`), since
  another kcoord may have written it meanwhile.
- Leaving (shutdown, or a stop beside another kcoord): nothing more is answered or sent
  before the LeaveGroup, watched or not, since the group admits a successor at once.
- Unwatched (the watch could not run: no rights on the group, no verdict in time, or it
  stopped): no lease, the process serves as a plain serve always did. A candidate again
  that gets no verdict in the same time (or whose watch stops) also serves unwatched, once
  its shards were reloaded: being unable to ask the group never stops a plain serve.
- The send gate: every write sent to the state topic (kcoord's own batches, and clients'
  transactional ones) asks the same question first and raises `LeaseLapsed` instead of
  sending: the runtime answers the waiters NOT_COORDINATOR and reloads the shard from the
  log, as for any failed write. A batch already handed to the upstream client before the
  process froze is beyond this gate (only fencing stops it: fencing=transactional).
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol


class LeaseLapsed(Exception):
    """A write not sent: this process's membership lease ran out (or it is not admitted)."""


class WatcherState(Protocol):
    solo_candidate: bool

    def serving(self, now: float | None = None) -> bool: ...


class SoloLease:
    """Whether a plain serve may answer from its shards and write them now."""

    def __init__(self, membership: WatcherState) -> None:
        self.membership = membership
        self.watched = False      # the group admitted this process: it holds the watch's lease
        self.reloading = False    # admitted again after a lapse: its shards reload from the log first
        self.stopped = False      # leaving the group: nothing more is answered or sent

    def serving(self) -> bool:
        if self.reloading or self.stopped:
            return False
        if not self.watched:
            return True
        m = self.membership
        return not m.solo_candidate and m.serving()

    def gate(self) -> Callable[[], bool] | None:
        """The service's response gate (`GroupCoordinatorService.serving`): None while it
        answers whatever happens (unwatched, nothing to check per request), else `serving`."""
        return self.serving if self.watched or self.reloading or self.stopped else None


class LeaseGatedLog:
    """The state log a plain serve's service writes through: `serving()` is asked before
    every send (`append`, `call_leader`, `call_transaction_coordinator`, and a load's
    `takeover` where the log has one); every other name is the wrapped log's."""

    def __init__(self, log: Any, serving: Callable[[], bool]) -> None:
        self._log = log
        self._serving = serving

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)

    def _check(self, what: str) -> None:
        if not self._serving():
            raise self._lapsed(what)

    def _lapsed(self, what: str) -> LeaseLapsed:
        return LeaseLapsed(f"{what} of state topic {self._log.topic} not sent: this kcoord's membership lease "
                           "ran out (another kcoord may serve the state topic now)")

    def append(self, partition: int, records: Any, timestamp_ms: int) -> Awaitable[int]:
        """The wrapped log's append as it returns it (a future of the lean writer's), not a
        coroutine awaiting it: one coroutine fewer per write. Refused, a failed future: the
        refusal is raised where the append is awaited, as any write failure."""
        if self._serving():
            return self._log.append(partition, records, timestamp_ms)
        refused: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        # the message built only when refused: a write per commit
        refused.set_exception(self._lapsed(f"a write to partition {partition}"))
        return refused

    @property
    def append_then(self) -> Callable[[int, Any, int, Callable[[int, BaseException | None], None]], None] | None:
        """The wrapped log's `append_then` behind the gate (runtime/partition_writer.py), or
        None where it has none (its writers then use `append`)."""
        inner = getattr(self._log, "append_then", None)
        if inner is None:
            return None

        def gated(partition: int, records: Any, timestamp_ms: int,
                  then: Callable[[int, BaseException | None], None]) -> None:
            if self._serving():
                inner(partition, records, timestamp_ms, then)
                return
            # Refused: handed over on the next loop turn, never from inside the call.
            asyncio.get_running_loop().call_soon(then, -1, self._lapsed(f"a write to partition {partition}"))
        return gated

    async def call_leader(self, partition: int, request: Any) -> Any:
        self._check(f"a client's transactional write to partition {partition}")
        return await self._log.call_leader(partition, request)

    @property
    def takeover(self) -> Callable[[int], Awaitable[Any]] | None:
        inner = getattr(self._log, "takeover", None)
        if inner is None:
            return None

        async def gated(partition: int) -> Any:
            self._check(f"the takeover of partition {partition}")
            return await inner(partition)
        return gated

    async def call_transaction_coordinator(self, transactional_id: str, request: Any) -> Any:
        self._check(f"a transaction request for {transactional_id!r}")
        return await self._log.call_transaction_coordinator(transactional_id, request)
