"""Everything a rehearsal saw, as plain data: the input of the (pure) analysis."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .plan import Step
from .probe import GroupSample
from .producer import Delivered


@dataclass(slots=True)
class MemberLog:
    """One process (incarnation) of one member slot, and the events it produced."""

    slot: int
    incarnation: int
    protocol: str
    client_id: str
    events: list[dict[str, Any]]


@dataclass(slots=True)
class StepLog:
    step: Step
    t_close_requested: int | None = None  # monotonic ns
    t_closed: int | None = None           # the old process exited
    t_spawned: int | None = None          # the new process started
    t_settled: int | None = None          # group stable again with every member
    offsets_before: dict[int, int] | None = None
    offsets_after: dict[int, int] | None = None


@dataclass(slots=True)
class Observations:
    plan: dict[str, Any]
    topic: str
    group: str
    partitions: int
    t0_ns: int
    started_at: str                       # wall clock, ISO 8601
    steps: list[StepLog] = field(default_factory=list)
    members: list[MemberLog] = field(default_factory=list)
    samples: list[GroupSample] = field(default_factory=list)
    delivered: list[Delivered] = field(default_factory=list)
    producer_failures: list[tuple[str, str]] = field(default_factory=list)
    t_first_stable: int | None = None
    t_produce_stopped: int | None = None
    t_end: int | None = None
    final_offsets: dict[int, int] | None = None
    errors: list[str] = field(default_factory=list)
