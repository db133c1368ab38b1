"""The event stream every consumer driver produces, whatever the client.

One event is a dict ``{"t": <CLOCK_MONOTONIC ns>, "event": <kind>, ...}``, the same
shape the Java ConsumerDriver prints as JSON lines:

    ready      subscribed, polling starts
    assigned / revoked / lost   partitions: [[topic, partition], ...]
    record     topic, partition, offset, value (str or None), key
    committed  offsets: [[topic, partition, next_offset], ...]
    error      error (type/code), message, fatal (bool)
    closed     clean close finished (group left)
    gone       the driver stopped abruptly (killed / stopped polling without close)

ConsumerEventLog keeps these, tracks the assignment, feeds an OwnershipLedger, and
lets tests wait on conditions with a bound. EventLogConsumer is the base every driver
extends, so tests use one interface for librdkafka, Java, aiokafka and kafka-python.
"""
from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .ownership import OwnershipLedger, TopicPartition
from .wait import WaitTimeout

T = TypeVar("T")
OWNERSHIP_KINDS = ("assigned", "revoked", "lost")


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    member: str
    topic: str
    partition: int
    offset: int
    value: str | None
    t_ns: int
    key: str | None = None


def partitions_field(tps: Iterable[TopicPartition]) -> list[list[Any]]:
    return [[t, p] for t, p in sorted(tps)]


class ConsumerEventLog:
    def __init__(self, member: str, ledger: OwnershipLedger | None = None) -> None:
        self.member = member
        self.ledger = ledger
        self._cond = threading.Condition()
        self._events: list[dict[str, Any]] = []
        self._assignment: set[TopicPartition] = set()
        self._consumed: list[ConsumedRecord] = []

    def emit(self, event: str, t_ns: int | None = None, **fields: Any) -> dict[str, Any]:
        ev = {"t": time.monotonic_ns() if t_ns is None else t_ns, "event": event, **fields}
        self.apply(ev)
        return ev

    def apply(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        t_ns = int(ev["t"])
        with self._cond:
            self._events.append(ev)
            if kind in OWNERSHIP_KINDS:
                tps = [(str(t), int(p)) for t, p in ev.get("partitions", ())]
                if kind == "assigned":
                    self._assignment.update(tps)
                else:
                    self._assignment.difference_update(tps)
                if self.ledger is not None:
                    self.ledger.record(t_ns, self.member, kind, tps)
            elif kind == "gone":
                self._assignment.clear()
                if self.ledger is not None:
                    self.ledger.member_gone(t_ns, self.member)
            elif kind == "record":
                self._consumed.append(ConsumedRecord(
                    self.member, ev["topic"], int(ev["partition"]), int(ev["offset"]),
                    ev.get("value"), t_ns, ev.get("key")))
            self._cond.notify_all()

    # --- thread-safe views ----------------------------------------------------------------

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self._events if kind is None or e.get("event") == kind]

    def assignment(self) -> frozenset[TopicPartition]:
        with self._cond:
            return frozenset(self._assignment)

    def consumed(self) -> list[ConsumedRecord]:
        with self._cond:
            return list(self._consumed)

    def errors(self) -> list[dict[str, Any]]:
        return self.events("error")

    # --- bounded waits --------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], T], timeout: float, message: str = "condition") -> T:
        """Wait until ``predicate()`` is truthy; re-checked on every new event and every 100 ms.

        The predicate runs without this log's lock held, so it may read other drivers freely.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                seen = len(self._events)
            value = predicate()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                with self._cond:
                    raise WaitTimeout(
                        f"{self.member}: timed out after {timeout:.1f}s waiting for {message}; "
                        f"assignment={sorted(self._assignment)}, last events={self._events[-5:]}")
            with self._cond:
                if len(self._events) == seen:  # nothing new since the check: sleep until something is
                    self._cond.wait(min(remaining, 0.1))

    def wait_for_event(self, kind: str, timeout: float,
                       where: Callable[[dict[str, Any]], bool] = lambda e: True) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next((e for e in self.events(kind) if where(e)), None)
        return self.wait_for(found, timeout, f"a {kind!r} event")

    def wait_for_assignment(self, predicate: Callable[[frozenset[TopicPartition]], bool],
                            timeout: float) -> frozenset[TopicPartition]:
        matched: list[frozenset[TopicPartition]] = []

        def check() -> bool:  # the matching set itself may be empty (falsy), so keep it aside
            current = self.assignment()
            if predicate(current):
                matched.append(current)
                return True
            return False

        self.wait_for(check, timeout, "an assignment matching the predicate")
        return matched[-1]


class EventLogConsumer:
    """Base of every driver: the accessors tests use, delegated to the event log."""

    def __init__(self, member: str, ledger: OwnershipLedger | None) -> None:
        self.member = member
        self.log = ConsumerEventLog(member, ledger)

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return self.log.events(kind)

    def assignment(self) -> frozenset[TopicPartition]:
        return self.log.assignment()

    def consumed(self) -> list[ConsumedRecord]:
        return self.log.consumed()

    def consumed_values(self) -> list[str | None]:
        return [r.value for r in self.log.consumed()]

    def errors(self) -> list[dict[str, Any]]:
        return self.log.errors()

    def wait_for(self, predicate: Callable[[], T], timeout: float, message: str = "condition") -> T:
        return self.log.wait_for(predicate, timeout, message)

    def wait_for_event(self, kind: str, timeout: float,
                       where: Callable[[dict[str, Any]], bool] = lambda e: True) -> dict[str, Any]:
        return self.log.wait_for_event(kind, timeout, where)

    def wait_for_assignment(self, predicate: Callable[[frozenset[TopicPartition]], bool],
                            timeout: float) -> frozenset[TopicPartition]:
        return self.log.wait_for_assignment(predicate, timeout)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.member} assignment={sorted(self.assignment())}>"


class PythonClientConsumer(EventLogConsumer):
    """Base of the aiokafka and kafka-python drivers: both clients take the same
    configuration names, and both run on a thread of their own."""

    name_prefix = "py"

    def __init__(self, bootstrap: str, topics: str | Sequence[str], group: str, *, member: str | None = None,
                 ledger: OwnershipLedger | None = None, session_timeout_ms: int = 6000,
                 heartbeat_interval_ms: int | None = None, commit_mode: Literal["manual", "auto"] = "manual",
                 **extra_config: object) -> None:
        super().__init__(member or f"{self.name_prefix}-{next(_python_names)}", ledger)
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        self.commit_mode = commit_mode
        self.config = dict(
            bootstrap_servers=bootstrap, group_id=group, client_id=self.member, auto_offset_reset="earliest",
            enable_auto_commit=commit_mode == "auto", session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms or min(1000, session_timeout_ms // 3), **extra_config)
        self._consumer: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def _run(self) -> None:
        """The client's loop, on the driver's own thread; it sets ``_failure`` if it dies."""
        raise NotImplementedError

    def start(self, timeout: float = 15.0) -> PythonClientConsumer:
        self._thread = threading.Thread(target=self._run, name=f"{self.name_prefix}-{self.member}", daemon=True)
        self._thread.start()
        self.wait_for(lambda: self._failure is not None or self.events("ready"), timeout, "ready")
        if self._failure is not None:
            raise RuntimeError(f"{self.member}: failed to start: {self._failure!r}") from self._failure
        return self

    def close(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError(f"{self.member}: consumer thread still running after {timeout}s")
        if self._failure is not None:
            raise RuntimeError(f"{self.member}: consumer thread failed: {self._failure!r}") from self._failure

    def shutdown(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self.close(timeout=20)


_python_names = itertools.count(1)
