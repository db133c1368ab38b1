"""The workload: one producer writing unique values at a steady rate until stopped.

Each value is `<run id>-<sequence>`, so every consumed record names the produced one.
Delivery reports give each record's partition and offset; those (not ListOffsets) define
the end of every partition for the loss check.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, Message, Producer


@dataclass(frozen=True, slots=True)
class Delivered:
    value: str
    partition: int
    offset: int | None      # None: librdkafka reported a duplicate (already written) without its offset
    t_ns: int


class WorkloadProducer:
    def __init__(self, bootstrap: str, topic: str, run_id: str, rate: float,
                 extra_config: dict[str, Any] | None = None) -> None:
        if rate <= 0:
            raise ValueError(f"produce rate must be > 0 records/s, got {rate}")
        self.topic = topic
        self.run_id = run_id
        self.rate = rate
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                                   "enable.idempotence": True, "client.id": "kcoord-rehearse-producer",
                                   **(extra_config or {})})
        self.delivered: list[Delivered] = []
        self.failed: list[tuple[str, str]] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="workload-producer", daemon=True)
        self._error: BaseException | None = None

    def start(self) -> WorkloadProducer:
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> list[Delivered]:
        """Stop producing, wait for every delivery report, return the delivered records."""
        self._stop.set()
        self._thread.join(timeout)
        undelivered = self._producer.flush(timeout)
        if undelivered:
            self.failed.append(("<flush>", f"{undelivered} records still undelivered after {timeout}s"))
        if self._error is not None:
            self.failed.append(("<thread>", repr(self._error)))
        return list(self.delivered)

    def value(self, n: int) -> str:
        """The n-th record's value (unique here; the Streams rehearsal's words repeat)."""
        return f"{self.run_id}-{n:07d}"

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        value = msg.value().decode()
        if err is not None:
            self.failed.append((value, err.str()))
        else:
            self.delivered.append(Delivered(value, msg.partition(), msg.offset(), time.monotonic_ns()))

    def _run(self) -> None:
        period = 1.0 / self.rate
        next_at = time.monotonic()
        try:
            while not self._stop.is_set():
                try:
                    self._producer.produce(self.topic, value=self.value(self.sent).encode(),
                                           on_delivery=self._on_delivery)
                    self.sent += 1
                except BufferError:  # local queue full: serve reports and retry the same value
                    pass
                self._producer.poll(0)
                next_at += period
                self._stop.wait(max(0.0, next_at - time.monotonic()))
        except BaseException as exc:  # reported by stop()
            self._error = exc
