"""The membership lease: a process that has not heard from its membership group recently
must not answer, whatever its state says.

A process paused by GC or SIGSTOP resumes with state that may be stale: its shards may
have moved while it slept, and its timers have not fired yet. Fencing stops its *writes*
(producer epochs); the lease stops its *answers*, including the heartbeats it would
answer from memory. Before releasing any response the shell asks `valid(now)`: the time
since the last successful membership heartbeat must stay under the membership session
timeout minus a margin, so the lease ends before the group could have given the shards
to someone else. The clock is monotonic (time.monotonic), never the wall clock, which
can jump.

A new owner starts its members' session timers at load time plus `session_ms`: members
of a shard that just moved may not have reached the new owner yet.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Lease:
    session_ms: int                 # the membership group's session timeout
    margin_ms: int                  # safety margin under it (clock skew, the last RTT)
    renewed_ms: float | None = None  # monotonic ms of the last successful membership heartbeat

    def __post_init__(self) -> None:
        if not 0 <= self.margin_ms < self.session_ms:
            raise ValueError(f"lease margin {self.margin_ms} ms must be below the session timeout "
                             f"{self.session_ms} ms")

    def renew(self, now_ms: float) -> None:
        """A membership heartbeat (or JoinGroup/SyncGroup) that succeeded, sent at `now_ms`.
        The send time, not the answer's arrival, since the group counted from then."""
        if self.renewed_ms is None or now_ms > self.renewed_ms:
            self.renewed_ms = now_ms

    def drop(self) -> None:
        """The membership said this process is no longer the member it was (replaced,
        expired, fenced): stop answering now, not when the lease would have run out."""
        self.renewed_ms = None

    def valid(self, now_ms: float) -> bool:
        return self.renewed_ms is not None and now_ms - self.renewed_ms < self.session_ms - self.margin_ms

    def remaining_ms(self, now_ms: float) -> float:
        if self.renewed_ms is None:
            return 0.0
        return max(0.0, self.renewed_ms + self.session_ms - self.margin_ms - now_ms)
