"""Kafka Streams 4.4 applications (tests/clients/java/streams/CountStreamsApp.java) as JVM
subprocesses, and the checks the streams-group tests make on what they print.

- StreamsApp: one instance. Its JSON lines (each with "event" and "t", CLOCK_MONOTONIC ns,
  the same clock as time.monotonic_ns()) are kept in order; ``ask`` sends a stdin command
  and returns its answer line; ``kill`` is kill -9.
- active_overlaps: the instants where two instances held the same active task, from each
  task's own lifetime on each instance: its "active" open and close lines (a processor's init
  and close on the stream thread, CountStreamsApp's rules), between which the instance surely
  owned the task (assigned to it, not yet released). A task still open when the instance died
  or closed is held until its kill or its "closed" line. Not from the "tasks" lines: a thread's
  metadata lists a revoked task until the thread next enters RUNNING, after the new owner may
  already run it. The spans and their overlaps are the Streams rehearsal's (task_spans and
  overlaps in migration.rehearse.streams_analysis, which kcoord ships): one rule for both.
- set_group_configs: IncrementalAlterConfigs on the GROUP resource (raw, through whatever
  answers group APIs at the address: Kafka's coordinator or kcoord).
- counts_on: the latest count per word on the output topic (read_committed under EOS).

Rules: every wait is bounded and a failure shows the instance's stderr tail; every JVM is
reaped by shutdown() (fixtures call it); nothing here sleeps in place of a condition.
"""
from __future__ import annotations

import collections
import itertools
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

from migration.rehearse.member import read_events, read_lines
from migration.rehearse.streams_analysis import Span, overlaps, task_spans

from . import processes
from .admin import admin_client
from .differential import Coordinator, set_kafka_group_config
from .java import libs_java_command
from .wait import wait_until

Event = dict[str, Any]


class StreamsApp:
    """One CountStreamsApp JVM: start() → events / ask() → close() or kill()."""

    def __init__(self, bootstrap: str, *, app_id: str, input: str, output: str, state_dir: str, name: str,
                 guarantee: str = "at_least_once", instance_id: str | None = None,
                 app_server: str | None = None, protocol: str = "streams", batch_size: int | None = None,
                 zone: str | None = None) -> None:
        self._settings: dict[str, Any] = dict(
            bootstrap=bootstrap, app_id=app_id, input=input, output=output, state_dir=state_dir, name=name,
            guarantee=guarantee, instance_id=instance_id, app_server=app_server, protocol=protocol,
            batch_size=batch_size, zone=zone)
        self.name, self.app_server, self.instance_id, self.zone = name, app_server, instance_id, zone
        args = ["--bootstrap", bootstrap, "--app-id", app_id, "--input", input, "--output", output,
                "--state-dir", state_dir, "--name", name, "--guarantee", guarantee, "--protocol", protocol]
        if instance_id is not None:
            args += ["--instance-id", instance_id]
        if app_server is not None:
            args += ["--app-server", app_server]
        if batch_size is not None:
            args += ["--batch-size", str(batch_size)]
        if zone is not None:
            args += ["--zone", zone]      # client.tag.zone (zone-aware standbys)
        self.argv = libs_java_command("CountStreamsApp", args)
        self.process: subprocess.Popen | None = None
        self.killed_at: int | None = None
        self._events: list[Event] = []
        self._cond = threading.Condition()
        self._stderr: collections.deque[str] = collections.deque(maxlen=300)
        self._noise: list[str] = []
        self._readers: list[threading.Thread] = []

    # --- lifecycle -------------------------------------------------------------------------

    def again(self) -> StreamsApp:
        """A new, unstarted instance with this one's settings: its state directory, group
        instance id and endpoint (a restart)."""
        return StreamsApp(**self._settings)

    def start(self, timeout: float = 60.0) -> StreamsApp:
        process = self.process = processes.track(subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            encoding="utf-8", errors="replace", bufsize=1))
        self._readers = [threading.Thread(target=self._pump_out, daemon=True, name=f"{self.name}-out"),
                         threading.Thread(target=read_lines, args=(process.stderr, self._stderr),
                                          daemon=True, name=f"{self.name}-err")]
        for reader in self._readers:
            reader.start()
        self.wait_event(lambda e: e["event"] == "ready", timeout, "ready")
        return self

    def _pump_out(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        read_events(self.process.stdout, self._add, self._noise)
        with self._cond:
            self._cond.notify_all()

    def _add(self, event: Event) -> None:
        with self._cond:
            self._events.append(event)
            self._cond.notify_all()

    def kill(self) -> None:
        """kill -9: no commit, no leave; the group notices at the session's end."""
        assert self.process is not None
        self.killed_at = time.monotonic_ns()
        processes.kill(self.process)
        for reader in self._readers:
            reader.join(5)

    def shutdown(self, timeout: float = 40.0, how: str = "") -> int | None:
        """Close (stdin "close", "close leave" or "close remain" with ``how`` "leave"/"remain";
        Streams' own 30 s bound), kill -9 past ``timeout``."""
        if self.process is None:
            return None
        return processes.close_by_stdin(self.process, f"close {how}".strip(), timeout)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # --- what it printed -----------------------------------------------------------------

    def events(self, kind: str | None = None) -> list[Event]:
        with self._cond:
            return [e for e in self._events if kind is None or e["event"] == kind]

    def wait_event(self, match: Callable[[Event], bool], timeout: float, what: str, after: int = 0) -> Event:
        """The first event from index ``after`` on that ``match``es; fails on "fatal" or exit."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in itertools.islice(self._events, after, None):
                    if event["event"] == "fatal":
                        raise AssertionError(f"{self.name}: {event}; stderr:\n{self.stderr_tail()}")
                    if match(event):
                        return event
                left = deadline - time.monotonic()
                if left <= 0 or (self.process is not None and self.process.poll() is not None
                                 and not self._readers[0].is_alive()):
                    state = "exited" if left > 0 else f"not within {timeout:.0f} s"
                    raise AssertionError(f"{self.name}: {what} ({state}); last events "
                                         f"{self._events[-5:]}; stderr:\n{self.stderr_tail()}")
                self._cond.wait(min(left, 0.5))

    def answer(self, command: str, timeout: float = 30.0) -> Event:
        """Send a stdin command; its answer, an "error" one included."""
        assert self.process is not None and self.process.stdin is not None
        kind = command.split()[0]
        with self._cond:
            mark = len(self._events)
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.wait_event(lambda e: e["event"] in (kind, "error"), timeout, f"answer to {command!r}", mark)

    def ask(self, command: str, timeout: float = 30.0) -> Event:
        """Send a stdin command; its answer (an "error" answer fails)."""
        answer = self.answer(command, timeout)
        assert answer["event"] == command.split()[0], f"{self.name}: {command!r} -> {answer}"
        return answer

    def state(self) -> str | None:
        states = self.events("state")
        return states[-1]["state"] if states else None

    def tasks(self) -> tuple[set[str], set[str]]:
        """(active, standby) task ids as the last "tasks" line says."""
        lines = self.events("tasks")
        return (set(lines[-1]["active"]), set(lines[-1]["standby"])) if lines else (set(), set())

    def stderr_tail(self, lines: int = 40) -> str:
        return "\n".join(list(self._stderr)[-lines:])


# --- checks ---------------------------------------------------------------------------------

def held_intervals(app: StreamsApp) -> list[Span]:
    """(task, from, to): the spans in which ``app`` surely held each task as active; an open
    one ends at its kill, its "closed" line, or now while it runs."""
    closed = app.events("closed")
    end = (app.killed_at if app.killed_at is not None else int(closed[-1]["t"]) if closed
           else time.monotonic_ns())
    return task_spans(app.events("active"), end)


def active_overlaps(apps: Iterable[StreamsApp]) -> list[str]:
    """Every pair of instances that held one active task at the same instant. An instance
    whose threads ran an active task but that printed no "active" line fails: without the
    lines there would be no spans, and no overlap to find."""
    apps = list(apps)
    silent = [a.name for a in apps if any(line["active"] for line in a.events("tasks")) and not a.events("active")]
    assert not silent, f"active tasks but no \"active\" lines from {silent}"
    return overlaps((app.name, held_intervals(app)) for app in apps)


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET on the GROUP resource at ``bootstrap``, then a bounded wait
    until it describes them (differential.set_kafka_group_config: Kafka's broker applies a
    change after its controller answers, and a static member's session timer ran on the old
    6 s while it restarted); fails on any error."""
    set_kafka_group_config(Coordinator("group APIs", bootstrap), group, configs)


def counts_on(bootstrap: str, topic: str, partitions: int, timeout: float = 10.0,
              read_committed: bool = False) -> dict[str, int]:
    """The latest value per key of ``topic`` (read to its end offsets, or to its last stable
    offsets with ``read_committed``), as ints."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
    latest: dict[str, int] = {}
    try:
        ends = _end_offsets(bootstrap, topic, partitions, read_committed, timeout)
        assigned = [TopicPartition(topic, p, 0) for p in range(partitions)]
        consumer.assign(assigned)
        seen = {p: 0 for p in range(partitions)}

        def read_all() -> bool:
            for m in consumer.consume(1000, 0.2):
                key, value = m.key(), m.value()
                if m.error() is None and key is not None and value is not None:
                    latest[key.decode()] = int(value.decode())
            # The position, not the last record's offset: it moves past transaction markers.
            seen.update((tp.partition, tp.offset) for tp in consumer.position(assigned))
            return all(seen[p] >= ends[p] for p in ends)

        wait_until(read_all, timeout, 0, lambda: f"{topic} read to {ends} (at {seen})")
    finally:
        consumer.close()
    return latest


def _end_offsets(bootstrap: str, topic: str, partitions: int, read_committed: bool,
                 timeout: float) -> dict[int, int]:
    """ListOffsets LATEST per partition: the high watermarks, or with ``read_committed`` the
    last stable offsets (a transaction still open, a killed producer's, stays unread)."""
    level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    admin = admin_client(bootstrap)   # held until the answers are in: its futures die with it
    answers = admin.list_offsets(asked, isolation_level=level, request_timeout=timeout)
    return {tp.partition: future.result(timeout).offset for tp, future in answers.items()}
