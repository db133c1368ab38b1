"""Real librdkafka consumers (confluent-kafka, group.protocol=consumer), several per OS process:
each is one Consumer on its own thread (every librdkafka call of a consumer on that thread, as
tests/support/rdkafka.py does), created and connected first, then subscribing when told ("go"),
so that a group forms at once as in seed 003's formation benchmark. Assignment changes are
stamped (monotonic ns, after incremental_assign / incremental_unassign returned) so the moment
the group became complete, disjoint and balanced is read from the events, not from a poll.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from confluent_kafka import Consumer, TopicPartition


class StormMember:
    def __init__(self, name: str, bootstrap: str, topic: str, group: str, go: threading.Event,
                 events: list, lock: threading.Lock, extra: dict | None = None) -> None:
        self.name = name
        self.topic = topic
        self.go = go
        self.events = events          # shared: (t_ns, name, "assigned" | "revoked", frozenset of partitions)
        self.lock = lock
        self.config = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                       "client.id": name, "enable.auto.commit": False, "auto.offset.reset": "latest",
                       "enable.partition.eof": False, **(extra or {})}
        self.subscribed_ns: int | None = None
        self.created = threading.Event()
        self.failure: BaseException | None = None
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"storm-{name}", daemon=True)

    def start(self) -> StormMember:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _stamp(self, kind: str, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self.events.append((time.monotonic_ns(), self.name, kind, frozenset(p.partition for p in partitions)))

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.incremental_assign(partitions)
        self._stamp("assigned", partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.incremental_unassign(partitions)
        self._stamp("revoked", partitions)

    def _run(self) -> None:
        consumer = None
        try:
            consumer = Consumer({**self.config, "error_cb": lambda e: self.errors.append(e.str())})
            # One metadata round trip so the client is connected before the storm starts.
            consumer.list_topics(self.topic, timeout=30)
            self.created.set()
            while not self.go.wait(0.05):
                if self._stop.is_set():
                    return
            consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                               on_lost=self._on_revoke)
            self.subscribed_ns = time.monotonic_ns()
            while not self._stop.is_set():
                consumer.poll(0.05)
        except BaseException as e:      # reported by the benchmark, never silently dropped
            self.failure = e
            self.created.set()
        finally:
            if consumer is not None:
                consumer.close()


def formed_at(events: Sequence[tuple[int, str, str, frozenset]], names: Sequence[str],
              partitions: int) -> int | None:
    """The first event time at which every member's assignment was complete (each partition
    once), disjoint and balanced (sizes within one), that held to the end of ``events``;
    None if the last state is not."""
    state: dict[str, set[int]] = {n: set() for n in names}
    since: int | None = None
    for t, name, kind, parts in sorted(events):
        if kind == "assigned":
            state[name] |= parts
        else:
            state[name] -= parts
        ok = balanced(state, partitions)
        if ok and since is None:
            since = t
        elif not ok:
            since = None
    return since


def balanced(state: dict[str, set[int]], partitions: int) -> bool:
    owned = [p for s in state.values() for p in s]
    if len(owned) != partitions or set(owned) != set(range(partitions)):
        return False
    sizes = [len(s) for s in state.values()]
    return max(sizes) - min(sizes) <= 1
