"""What a rehearsal does: the plan and its rolling-restart schedule (pure)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Direction = Literal["upgrade", "downgrade"]
Protocol = Literal["classic", "consumer"]


@dataclass(slots=True)
class RehearsalPlan:
    direction: Direction
    bootstrap: str
    client: Literal["rdkafka", "java"] = "rdkafka"
    members: int = 5
    topic: str | None = None            # None: create `kcoord-rehearse-<run id>`
    partitions: int | None = None       # of a created topic; default 2 per member
    group: str | None = None            # None: `kcoord-rehearse-<run id>`
    round_trip: bool = False            # roll back to the starting protocol afterwards
    produce_rate: float = 50.0          # records per second
    warmup_s: float = 3.0               # all members consuming, before the first restart
    dwell_s: float = 2.0                # after each restart settles, before the next one
    settle_timeout_s: float = 60.0      # bound on one restart settling
    drain_timeout_s: float = 30.0       # bound on consuming the tail after producing stops
    sample_interval_s: float = 0.25     # group probe period
    classic_session_timeout_ms: int = 10_000
    classic_heartbeat_interval_ms: int = 1_000
    classic_assignor: str | None = None  # client-side partition.assignment.strategy (classic)
    java_cache: Path | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def __post_init__(self) -> None:
        if self.java_cache is not None:
            self.java_cache = Path(self.java_cache)
        if self.direction not in ("upgrade", "downgrade"):
            raise ValueError(f"direction must be 'upgrade' or 'downgrade', not {self.direction!r}")
        if self.client not in ("rdkafka", "java"):
            raise ValueError(f"client must be 'rdkafka' or 'java', not {self.client!r}")
        if self.members < 1:
            raise ValueError(f"members must be >= 1, got {self.members}")
        if self.partitions is not None and self.partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {self.partitions}")
        host, sep, port = self.bootstrap.split(",")[0].rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"bootstrap must be host:port, got {self.bootstrap!r}")

    @property
    def topic_name(self) -> str:
        return self.topic or f"kcoord-rehearse-{self.run_id}"

    @property
    def group_name(self) -> str:
        return self.group or f"kcoord-rehearse-{self.run_id}"

    @property
    def start_protocol(self) -> Protocol:
        return "classic" if self.direction == "upgrade" else "consumer"

    @property
    def target_protocol(self) -> Protocol:
        return "consumer" if self.direction == "upgrade" else "classic"


@dataclass(frozen=True, slots=True)
class Step:
    """Restart member ``slot``: stop its running process, start one speaking ``to``."""

    index: int
    phase: int        # 0: start -> target; 1: back again (round trip)
    slot: int
    from_protocol: Protocol
    to_protocol: Protocol


def rolling_schedule(plan: RehearsalPlan) -> list[Step]:
    """Members restarted one by one, in slot order; a round trip rolls them back the same way."""
    phases = [(plan.start_protocol, plan.target_protocol)]
    if plan.round_trip:
        phases.append((plan.target_protocol, plan.start_protocol))
    steps = []
    for phase, (old, new) in enumerate(phases):
        for slot in range(plan.members):
            steps.append(Step(len(steps), phase, slot, old, new))
    return steps


def expected_conversions(plan: RehearsalPlan) -> list[dict]:
    """When Kafka converts the group (docs/design/kafka-facts.md §5): one conversion per phase.

    Upgrade: the first ConsumerGroupHeartbeat of a consumer-protocol member converts the
    non-empty classic group, so at the first step that starts a `consumer` member.
    Downgrade: when the last consumer-protocol member leaves, so at the last step of a
    consumer -> classic phase, when that member stops.
    """
    out = []
    for step in rolling_schedule(plan):
        if step.to_protocol == "consumer" and step.slot == 0:
            out.append({"step": step.index, "to": "consumer", "trigger": "join",
                        "why": "first consumer-protocol member joins a non-empty classic group"})
        elif step.to_protocol == "classic" and step.slot == plan.members - 1:
            if plan.members > 1:
                out.append({"step": step.index, "to": "classic", "trigger": "leave",
                            "why": "last consumer-protocol member leaves; all remaining members are classic"})
            else:  # the leave empties the group; the classic JoinGroup then converts it offline
                out.append({"step": step.index, "to": "classic", "trigger": "join",
                            "why": "a classic member joins the empty consumer group"})
    return out
