"""A producer paced at a steady rate, each value carrying its send time.

Values are ``<seq>:<CLOCK_MONOTONIC ns at send>``, so a consumer's "record" event gives
the record's end-to-end delay on one clock (consumer processes stamp with the same clock).
Partitions: librdkafka's default for null keys (random per record), so every partition
of the topic receives about rate/partitions records per second.
"""
from __future__ import annotations

import threading
import time

from confluent_kafka import Producer


class PacedProducer:
    def __init__(self, bootstrap: str, topic: str, rate: float, tick: float = 0.01) -> None:
        self.topic = topic
        self.rate = rate
        self.tick = tick
        self.sent = 0
        self.delivered = 0
        self.failed = 0
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": 1})
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
                value = f"{self.sent}:{time.monotonic_ns()}".encode()
                try:
                    self._producer.produce(self.topic, value=value, on_delivery=self._on_delivery)
                except BufferError:
                    break
                self.sent += 1
            self._producer.poll(0)
            self._stop.wait(self.tick)

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        self._producer.flush(timeout)


def sent_ns(value: str | None) -> int | None:
    """The send time carried by a PacedProducer value."""
    if not value or ":" not in value:
        return None
    try:
        return int(value.rsplit(":", 1)[1])
    except ValueError:
        return None
