"""An incremental cooperative assignor for connect groups, written from KIP-415 (not
translated from Connect's IncrementalCooperativeAssignor).

What KIP-415 documents, and how it maps onto a declarative target (docs/design/connect-groups-spec.md):
- Sticky: a unit stays with its worker while the worker is in the group and the unit
  still exists.
- Deleted units (gone from the configuration) are dropped.
- New units go to the least loaded workers, connectors and tasks balanced separately.
- Lost units (assigned in the previous round, still configured, owned by no worker: their
  worker left) are *held back* for `scheduled.rebalance.max.delay.ms` so a bounced worker
  can come back and get them; the assignment says how long is left (`delay_ms`), and the
  worker that computed it asks for a new round when that runs out (a Reason bump,
  001:L196). When the delay is over, or when new workers have joined meanwhile (the
  returning worker is one of them: it rejoins under a new member id), the lost units are
  placed.
- Balance: after placement, units move from the most to the least loaded worker until
  loads differ by at most one. The coordinator revokes them first (the seed's
  revoke-before-assign), which KIP-415 did with a second rebalance.
The assignor's memory (the previous round's units and workers, the scheduled deadline) is
the leader's, as in KIP-415. A new assigner starts without it; unlike KIP-415's leader, it
then counts every unowned configured unit as lost (not new), so the delay also holds when
the leader itself died.

Metadata (version 1, this library's own format; Connect's ConnectProtocol only matters
when mixing with Java workers): a worker's is JSON {"url": ...}; the per-worker
assignment metadata is JSON {"leader": assigner id, "leader_url": ..., "delay_ms": ...}.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

Unit = tuple[str, int]      # (connector, task); task -1 is the connector itself
CONNECTOR_TASK = -1
NAME = "incremental-cooperative"
VERSION = 1


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    member_id: str
    metadata: bytes
    current: frozenset[Unit]      # its current target (the stickiness input)


@dataclass(frozen=True, slots=True)
class Assignment:
    targets: dict[str, frozenset[Unit]]
    metadata: dict[str, bytes]
    delay_ms: int                 # > 0: units are held back; ask for a round after this


def worker_metadata(url: str) -> bytes:
    return json.dumps({"url": url}, sort_keys=True).encode()


def url_of(metadata: bytes) -> str:
    try:
        return str(json.loads(metadata or b"{}").get("url", ""))
    except (ValueError, AttributeError):
        return ""


def decode_assignment_metadata(metadata: bytes) -> dict:
    try:
        out = json.loads(metadata or b"{}")
        return out if isinstance(out, dict) else {}
    except ValueError:
        return {}


def _is_connector(u: Unit) -> bool:
    return u[1] == CONNECTOR_TASK


class IncrementalCooperativeAssignor:
    name = NAME
    minimum_version = VERSION
    maximum_version = VERSION
    version = VERSION

    def __init__(self, configured: Callable[[], Iterable[Unit]], *, url: str = "",
                 scheduled_rebalance_max_delay_ms: int = 300_000) -> None:
        self.configured = configured
        self.url = url
        self.max_delay_ms = scheduled_rebalance_max_delay_ms
        self.previous_units: frozenset[Unit] | None = None
        self.previous_workers: frozenset[str] = frozenset()
        self.scheduled_ms: int | None = None

    def metadata(self) -> bytes:
        return worker_metadata(self.url)

    def assign(self, leader: str, workers: Mapping[str, WorkerSpec], now_ms: int) -> Assignment:
        config = frozenset(self.configured())
        current = {m: set(w.current & config) for m, w in workers.items()}     # deleted units dropped
        assigned = set().union(*current.values()) if current else set()
        previous = self.previous_units
        if previous is None:
            # No memory (this worker was not the assigner before: the leader changed). KIP-415's
            # leader would treat every unassigned unit as new and place it at once; here every
            # configured unit nobody owns in a group that already had an assignment counts as
            # lost, so the scheduled delay holds even when the leader itself died (C11). A
            # connector created during a leader change waits for the delay too.
            previous = config if assigned else frozenset()
        lost = (previous & config) - assigned
        new_workers = [m for m in sorted(workers) if m not in self.previous_workers and not current[m]]
        held: set[Unit] = set()
        delay = 0
        place: set[Unit] = set(config - assigned - lost)
        if lost and workers:
            if self.scheduled_ms is None and self.max_delay_ms > 0:
                self.scheduled_ms = now_ms + self.max_delay_ms
            if self.scheduled_ms is None or now_ms >= self.scheduled_ms:
                place |= lost
                self.scheduled_ms = None
            elif new_workers and self.previous_units is not None:
                # KIP-415: workers that joined during the delay (a bounced one among them) take them.
                self._spread(sorted(lost), {m: current[m] for m in new_workers})
                self.scheduled_ms = None
            else:
                held = set(lost)
                delay = self.scheduled_ms - now_ms
        elif not lost:
            self.scheduled_ms = None
        if workers:
            self._spread(sorted(place), current)
            if not held:
                self._balance(current)
        self.previous_units = frozenset(set().union(*current.values()) | held) if current else frozenset(held)
        self.previous_workers = frozenset(workers)
        leader_url = url_of(workers[leader].metadata) if leader in workers else self.url
        meta = json.dumps({"leader": leader, "leader_url": leader_url, "delay_ms": delay}, sort_keys=True).encode()
        return Assignment({m: frozenset(us) for m, us in current.items()}, {m: meta for m in current}, delay)

    @staticmethod
    def _load(units: set[Unit], connectors: bool) -> int:
        return sum(1 for u in units if _is_connector(u) == connectors)

    def _spread(self, units: list[Unit], into: dict[str, set[Unit]]) -> None:
        for u in units:
            kind = _is_connector(u)
            target = min(into, key=lambda m: (self._load(into[m], kind), len(into[m]), m))
            into[target].add(u)

    def _balance(self, current: dict[str, set[Unit]]) -> None:
        for kind in (True, False):
            while True:
                most = max(current, key=lambda m: (self._load(current[m], kind), m))
                least = min(current, key=lambda m: (self._load(current[m], kind), m))
                if self._load(current[most], kind) - self._load(current[least], kind) <= 1:
                    break
                unit = max(u for u in current[most] if _is_connector(u) == kind)
                current[most].discard(unit)
                current[least].add(unit)
