"""What a Streams rehearsal does (pure): a real Kafka Streams application moved offline from
the classic protocol to the streams protocol (KIP-1071) and back, and what Kafka 4.4 does to
its group at each step (docs/user/rehearse.md, "Streams").

Rules:
- phases run one after another: classic, streams, classic; each starts N instances of the same
  application id and stops every one of them before the next phase starts: the migration is
  offline, so the group must be empty in between;
- stopping is ``leave`` (default: CloseOptions LEAVE_GROUP, the member leaves at once) or
  ``session`` (REMAIN_IN_GROUP: the coordinator removes each member when its session expires,
  what a crashed or killed deployment leaves behind; slower by the session timeout);
- Kafka's conversions (GroupMetadataManager): the first StreamsGroupHeartbeat to the empty
  classic group converts it to a streams group; the first JoinGroup to the empty streams group
  converts it back; the committed offsets stay through both.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

StreamsProtocol = Literal["classic", "streams"]
StopMode = Literal["leave", "session"]
Guarantee = Literal["at_least_once", "exactly_once_v2"]
GUARANTEES: tuple[Guarantee, ...] = ("at_least_once", "exactly_once_v2")
PHASES: tuple[StreamsProtocol, ...] = ("classic", "streams", "classic")
STOP_WHY = {
    "leave": "every instance closes with CloseOptions LEAVE_GROUP: it commits and leaves at once, so the group "
             "is Empty seconds later (a plain close() of a classic Streams client does not leave: the group would "
             "stay non-empty, and refuse the other protocol, for the whole session timeout)",
    "session": "every instance closes with REMAIN_IN_GROUP, as a crashed deployment would: the coordinator removes "
               "each member when its session expires (the classic session, or the group's "
               "streams.session.timeout.ms), so each phase ends a session timeout later",
}
SUBTOPOLOGIES = ("0", "1")   # 0 reads the input, 1 the repartition topic (StreamsRehearsalApp.java)


@dataclass(slots=True)
class StreamsRehearsalPlan:
    bootstrap: str
    instances: int = 3
    partitions: int = 4                 # of the input topic (created); 2 x partitions tasks
    input_topic: str | None = None      # None: `kcoord-rehearse-<run id>-in`
    output_topic: str | None = None     # None: `kcoord-rehearse-<run id>-out`
    app_id: str | None = None           # the group id; None: `kcoord-rehearse-<run id>`
    stop: StopMode = "leave"
    # The application's processing.guarantee. exactly_once_v2: each commit is one transaction of
    # the outputs and the input offsets (TxnOffsetCommit with the member's epoch, KIP-447), and
    # the rehearsal reads the output topic read_committed.
    guarantee: Guarantee = "at_least_once"
    produce_rate: float = 50.0          # input records per second, through every phase
    words: int = 17                     # distinct values the application counts
    phase_s: float = 3.0                # processing after a phase settles, before its instances stop
    settle_timeout_s: float = 90.0      # bound on a phase settling and on the group emptying
    drain_timeout_s: float = 60.0       # bound on processing the tail in the last phase
    classic_session_timeout_ms: int = 10_000   # the classic members' session (stop = session)
    commit_interval_ms: int = 500
    sample_interval_s: float = 0.25
    state_dir: Path | None = None       # None: a temporary directory, removed afterwards
    java_cache: Path | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def __post_init__(self) -> None:
        for name in ("java_cache", "state_dir"):
            if getattr(self, name) is not None:
                setattr(self, name, Path(getattr(self, name)))
        if self.instances < 1:
            raise ValueError(f"instances must be >= 1, got {self.instances}")
        if self.partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {self.partitions}")
        if self.words < 1:
            raise ValueError(f"words must be >= 1, got {self.words}")
        if self.stop not in ("leave", "session"):
            raise ValueError(f"stop must be 'leave' or 'session', not {self.stop!r}")
        if self.guarantee not in GUARANTEES:
            raise ValueError(f"guarantee must be one of {', '.join(GUARANTEES)}, not {self.guarantee!r}")
        if self.produce_rate <= 0:
            raise ValueError(f"produce rate must be > 0 records/s, got {self.produce_rate}")
        host, sep, port = self.bootstrap.split(",")[0].rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"bootstrap must be host:port, got {self.bootstrap!r}")

    @property
    def exactly_once(self) -> bool:
        return self.guarantee == "exactly_once_v2"

    @property
    def group(self) -> str:
        return self.app_id or f"kcoord-rehearse-{self.run_id}"

    @property
    def input_name(self) -> str:
        return self.input_topic or f"kcoord-rehearse-{self.run_id}-in"

    @property
    def output_name(self) -> str:
        return self.output_topic or f"kcoord-rehearse-{self.run_id}-out"

    @property
    def tasks(self) -> frozenset[str]:
        return frozenset(f"{s}_{p}" for s in SUBTOPOLOGIES for p in range(self.partitions))

    def word(self, n: int) -> str:
        """The value of the n-th input record."""
        return f"w{n % self.words}"


def group_type_of(protocol: StreamsProtocol) -> str:
    """The group type ListGroups reports while instances of ``protocol`` run."""
    return "classic" if protocol == "classic" else "streams"


def expected_phases() -> list[dict]:
    """Per phase: the group type while it runs, and what Kafka 4.4 does when it starts."""
    out = []
    for i, protocol in enumerate(PHASES):
        if i == 0:
            why = "the first JoinGroup creates the classic group"
        elif protocol == "streams":
            why = "the first StreamsGroupHeartbeat (epoch 0) converts the empty classic group; offsets kept"
        else:
            why = "the first JoinGroup converts the empty streams group; offsets kept"
        out.append({"phase": i, "protocol": protocol, "group_type": group_type_of(protocol), "on_start": why})
    return out
