"""Everything a Streams rehearsal saw, as plain data: the input of its (pure) analysis.

Times are CLOCK_MONOTONIC ns (time.monotonic_ns(), and System.nanoTime() in the instances)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .probe import GroupSample
from .producer import Delivered


@dataclass(slots=True)
class InstanceLog:
    """One instance (process) of one phase, and the lines it printed (StreamsRehearsalApp.java)."""

    phase: int
    slot: int
    protocol: str
    client_id: str
    events: list[dict[str, Any]]


@dataclass(slots=True)
class PhaseLog:
    index: int
    protocol: str
    t_start: int | None = None           # the first instance spawned
    t_settled: int | None = None         # every task running once, the group Stable with every instance
    t_stop_requested: int | None = None
    t_stopped: int | None = None         # every instance exited
    t_empty: int | None = None           # the coordinator reported the group Empty
    committed_at_start: dict[int, int] | None = None
    committed_at_stop: dict[int, int] | None = None
    committed_at_empty: dict[int, int] | None = None


@dataclass(slots=True)
class StreamsObservations:
    plan: dict[str, Any]
    group: str
    input_topic: str
    output_topic: str
    partitions: int
    t0_ns: int
    started_at: str                       # wall clock, ISO 8601
    phases: list[PhaseLog] = field(default_factory=list)
    instances: list[InstanceLog] = field(default_factory=list)
    samples: list[GroupSample] = field(default_factory=list)
    delivered: list[Delivered] = field(default_factory=list)
    producer_failures: list[tuple[str, str]] = field(default_factory=list)
    output_counts: dict[str, int] | None = None   # the latest count per word on the output topic
    output_read: dict[str, Any] | None = None     # how it was read (streams_output.OutputReader.summary)
    t_produce_stopped: int | None = None
    t_end: int | None = None
    errors: list[str] = field(default_factory=list)
