"""A producer paced at a steady rate, each value carrying its send time.

Values are ``<seq>:<CLOCK_MONOTONIC ns at send>``, so a consumer's "record" event gives
the record's end-to-end delay on one clock (consumer processes stamp with the same clock).
Partitions: one at random per record (librdkafka's partitioner for null keys with
``sticky.partitioning.linger.ms`` 0), so every partition of the topic receives about
rate/partitions records per second, spread over time. librdkafka's default (10 ms) keeps
one partition for 10 ms, so each partition got a burst of ~20 records every ~220 ms at
2,000 records/s over 22 partitions; a member handed a partition between two bursts then
waited up to a Fetch long-poll for its first record, and the join rows measured where the
next burst landed instead of the handoff (docs/measurements/side-by-side.md, "the tuned
11th member, phase by phase").
``value`` replaces those values (the Streams rebalance benchmark's input, whose counts must
change: bench/bench_streams_rebalance.py ``--input-rate``).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from confluent_kafka import Producer


class PacedProducer:
    def __init__(self, bootstrap: str, topic: str, rate: float, tick: float = 0.01,
                 value: Callable[[int], bytes] | None = None) -> None:
        self.topic = topic
        self._value = value or (lambda seq: f"{seq}:{time.monotonic_ns()}".encode())
        self.rate = rate
        self.tick = tick
        self.sent = 0
        self.delivered = 0
        self.failed = 0
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": 1,
                                   "sticky.partitioning.linger.ms": 0})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"paced-{topic}", daemon=True)

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def _on_delivery(self, err, _msg) -> None:
        if err is None:
            self.delivered += 1
        else:
            self.failed += 1

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due:
                value = self._value(self.sent)
                try:
                    self._producer.produce(self.topic, value=value, on_delivery=self._on_delivery)
                except BufferError:
                    break
                self.sent += 1
            self._producer.poll(0)
            self._stop.wait(self.tick)

    def stop(self, timeout: float = 30.0) -> dict[str, int]:
        """Stops, flushes, and says what was sent, delivered and failed."""
        self._stop.set()
        self._thread.join(timeout)
        self._producer.flush(timeout)
        return {"sent": self.sent, "delivered": self.delivered, "failed": self.failed}


def sent_ns(value: str | None) -> int | None:
    """The send time carried by a PacedProducer value."""
    if not value or ":" not in value:
        return None
    try:
        return int(value.rsplit(":", 1)[1])
    except ValueError:
        return None
