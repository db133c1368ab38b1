"""The two measured scenarios: an 11th member joining ten that consume, and a group of ten forming.

A Target says where the group lives and how its members speak: kcoord (a gateway in front
of Tansu) or Tansu itself, classic (eager range / cooperative-sticky) or the consumer
protocol, librdkafka or the Java 4.4 client.
"""
from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from support.admin import create_topic
from support.wait import wait_until

from .members import ProcessMember, java_argv, rdkafka_argv
from .producer import PacedProducer
from .timeline import NS, JoinFigures, balanced, join_figures

JAVA_DEBUG_LOG4J = Path(__file__).resolve().parent / "log4j2-debug.properties"
READY_S = 120.0     # until a member process has subscribed


@dataclass(frozen=True)
class Target:
    label: str
    bootstrap: str
    protocol: str  # classic | consumer
    client: str = "rdkafka"  # rdkafka | java
    assignor: str | None = None  # classic partition.assignment.strategy
    session_timeout_ms: int = 6000  # classic only
    heartbeat_interval_ms: int = 2000  # classic only
    debug: bool = False  # client debug log (librdkafka debug=cgrp, Java DEBUG) in each member's stderr log
    props: tuple[tuple[str, str], ...] = ()  # extra librdkafka properties

    def argv(self, topic: str, group: str, name: str, wait_go: bool = False) -> list[str]:
        common = dict(protocol=self.protocol, assignor=self.assignor, client_id=name,
                      session_timeout_ms=self.session_timeout_ms, heartbeat_interval_ms=self.heartbeat_interval_ms)
        if self.client == "java":
            if wait_go:
                raise ValueError("the Java driver subscribes at start: no --wait-go")
            argv = java_argv(self.bootstrap, topic, group, **common)
            if self.debug:  # the consumer internals at DEBUG into the member's stderr log
                argv = [f"-Dlog4j2.configurationFile={JAVA_DEBUG_LOG4J}"
                        if a.startswith("-Dlog4j2.configurationFile=") else a for a in argv]
            return argv
        props = {**dict(self.props), **({"debug": "cgrp"} if self.debug else {})}
        return rdkafka_argv(self.bootstrap, topic, group, wait_go=wait_go, props=props, **common)


@dataclass
class JoinRun:
    target: Target
    figures: JoinFigures
    topic: str
    group: str
    t_join: int
    member_logs: dict[str, Path] = field(default_factory=dict)


def _names(prefix: str) -> tuple[str, str]:
    """Legal topic and group names (labels hold spaces and commas; Java splits topics on commas)."""
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", prefix).strip("-")[:40]
    tag = uuid.uuid4().hex[:8]
    return f"rb-{slug}-{tag}", f"rbg-{slug}-{tag}"


def _close_all(members: list[ProcessMember]) -> None:
    for m in members:  # ask everyone first, so the group does not rebalance ten times in a row
        if m.process is not None and m.process.poll() is None:
            try:
                m.send("close")
            except (BrokenPipeError, OSError, ValueError):
                pass
    for m in members:
        if m.process is not None:
            m.close(timeout=30)


def run_join(target: Target, *, partitions: int = 22, rate: float = 2000, existing: int = 10,
             before_s: float = 5.0, after_s: float = 3.0, bound_s: float = 60.0,
             log_dir: Path | None = None) -> JoinRun:
    """Ten members consume a topic at ``rate`` records/s; an 11th subscribes; measure.

    The window closes ``after_s`` after both the joiner has its first record and the
    assignment is complete, disjoint and balanced (bounded by ``bound_s``).
    """
    topic, group = _names(target.label)
    create_topic(target.bootstrap, topic, partitions)
    producer = PacedProducer(target.bootstrap, topic, rate).start()
    members = [ProcessMember(f"m{i}", target.argv(topic, group, f"m{i}"), log_dir=log_dir)
               for i in range(existing)]
    joiner: ProcessMember | None = None
    try:
        # All at once; a group of ten forming is not what this run measures.
        for m in members:
            m.start(wait_for=None)
        for m in members:
            # Ten member processes start at once; on a loaded machine (or with the load
            # generators pinned to one core) their interpreters take longer than 30 s.
            m.wait_ready(timeout=READY_S)
        steady_from: list[int] = []

        def steady() -> bool:
            state = {m.member: m.assignment() for m in members}
            ok = balanced(state, list(state), topic, partitions) and all(m.consumed() for m in members)
            if not ok:
                steady_from.clear()
                return False
            if not steady_from:
                steady_from.append(time.monotonic_ns())
            return time.monotonic_ns() - steady_from[0] >= before_s * NS

        wait_until(steady, bound_s, 0.05, lambda: f"{existing} members consuming a balanced assignment "
                   f"for {before_s}s: {[sorted(p for _, p in m.assignment()) for m in members]}")
        joiner = ProcessMember("new", target.argv(topic, group, "new"), log_dir=log_dir).start()
        t_join = int(joiner.events("ready")[0]["t"])
        everyone = [*members, joiner]
        settled: list[int] = []

        def settled_long_enough() -> bool:
            state = {m.member: m.assignment() for m in everyone}
            if not (joiner.consumed() and balanced(state, list(state), topic, partitions)):
                settled.clear()
                return False
            if not settled:
                settled.append(time.monotonic_ns())
            return time.monotonic_ns() - settled[0] >= after_s * NS

        wait_until(settled_long_enough, bound_s, 0.05, lambda: "the joiner consuming and a balanced "
                   f"assignment: {[(m.member, sorted(p for _, p in m.assignment())) for m in everyone]}")
        t_end = time.monotonic_ns()
        figures = join_figures(members, joiner, topic, partitions, t_join, t_end, before_s)
        logs = {m.member: m.stderr_path for m in everyone}
        return JoinRun(target, figures, topic, group, t_join, logs)
    finally:
        _close_all([*members, *([joiner] if joiner else [])])
        producer.stop()


@dataclass
class FormationRun:
    target: Target
    from_first_subscribe_s: float
    from_last_subscribe_s: float


def run_formation(target: Target, *, partitions: int = 20, size: int = 10, bound_s: float = 60.0,
                  log_dir: Path | None = None) -> FormationRun:
    """``size`` members, connected and bootstrapped, subscribe at once ("go"); time until the
    group's assignment is complete, disjoint and balanced (librdkafka only: --wait-go)."""
    topic, group = _names(f"form-{target.label}")
    create_topic(target.bootstrap, topic, partitions)
    members = [ProcessMember(f"f{i}", target.argv(topic, group, f"f{i}", wait_go=True), log_dir=log_dir)
               for i in range(size)]
    try:
        for m in members:
            m.start(wait_for="waiting")
        for m in members:
            m.send("go")
        for m in members:
            m.wait_ready("ready", 10)

        def formed() -> int | None:
            state = {m.member: m.assignment() for m in members}
            if not balanced(state, list(state), topic, partitions):
                return None
            return max(int(e["t"]) for m in members for e in m.events("assigned"))

        t_formed = wait_until(formed, bound_s, 0.01, "a balanced assignment of every partition")
        readies = [int(m.events("ready")[0]["t"]) for m in members]
        return FormationRun(target, (t_formed - min(readies)) / NS, (t_formed - max(readies)) / NS)
    finally:
        _close_all(members)
