"""Produce records with unique values, one record per batch.

Tansu's ListOffsets LATEST returns (base offset of the last batch + 1), wrong for
multi-record batches (environment.md 3.4.1). With batch.num.messages=1 every batch
holds one record, so end offsets and lag stay true while librdkafka still pipelines
many batches per request (600 records in ~0.1 s here).
"""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from .wait import wait_until

ONE_RECORD_PER_BATCH: dict[str, Any] = {"batch.num.messages": 1, "linger.ms": 0}


@dataclass(frozen=True, slots=True)
class ProducedRecord:
    topic: str
    partition: int
    offset: int
    value: str
    key: str | None


class ProduceFailed(RuntimeError):
    pass


def make_producer(bootstrap: str, extra_config: dict[str, Any] | None = None) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, **ONE_RECORD_PER_BATCH, **(extra_config or {})})


class _Deliveries:
    """Collects delivery reports; called from the producer's poll()/flush() on the caller's thread."""

    def __init__(self) -> None:
        self.delivered: list[ProducedRecord] = []
        self.failed: list[tuple[str, KafkaError]] = []

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        value = msg.value().decode() if msg.value() is not None else ""
        if err is not None:
            self.failed.append((value, err))
            return
        key = msg.key().decode() if msg.key() is not None else None
        self.delivered.append(ProducedRecord(msg.topic(), msg.partition(), msg.offset(), value, key))


def produce_records(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    prefix: str | None = None,
    partition: int | None = None,
    keyed: bool = False,
    timeout: float = 30.0,
    extra_config: dict[str, Any] | None = None,
) -> list[ProducedRecord]:
    """Produce ``count`` records with values ``<prefix>-<i>`` (prefix unique per call by default).

    Values spread over partitions by librdkafka's default partitioner (random for
    null keys, or by key when ``keyed``), or all go to ``partition``. Returns the
    delivered records with their offsets; raises ProduceFailed if any delivery failed.
    """
    prefix = prefix or f"v{uuid.uuid4().hex[:8]}"
    producer = make_producer(bootstrap, extra_config)
    reports = _Deliveries()
    for i in range(count):
        value = f"{prefix}-{i}"
        kwargs: dict[str, Any] = {"value": value.encode(), "on_delivery": reports}
        if partition is not None:
            kwargs["partition"] = partition
        if keyed:
            kwargs["key"] = f"k{i}".encode()
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(timeout)
    if remaining or reports.failed or len(reports.delivered) != count:
        raise ProduceFailed(f"produced {len(reports.delivered)}/{count} to {topic}; "
                            f"{remaining} undelivered, failures: {reports.failed[:5]}")
    return reports.delivered


class BackgroundProducer:
    """Produces ``<prefix>-<i>`` to ``topic`` every ``interval`` s on its own thread until stop().

    stop() flushes and returns every delivered record, so a test can check that all of
    them were consumed while consumers joined, left or died.
    """

    def __init__(self, bootstrap: str, topic: str, *, interval: float = 0.005, prefix: str | None = None,
                 extra_config: dict[str, Any] | None = None) -> None:
        self.topic = topic
        self.interval = interval
        self.prefix = prefix or f"bg{uuid.uuid4().hex[:8]}"
        self._producer = make_producer(bootstrap, extra_config)
        self._reports = _Deliveries()
        self._stop = threading.Event()
        self._sent = 0
        self._thread = threading.Thread(target=self._run, name=f"producer-{topic}", daemon=True)
        self._error: BaseException | None = None

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    @property
    def sent(self) -> int:
        return self._sent

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self._producer.produce(self.topic, value=f"{self.prefix}-{self._sent}".encode(),
                                           on_delivery=self._reports)
                    self._sent += 1
                except BufferError:
                    pass
                self._producer.poll(0)
                self._stop.wait(self.interval)
        except BaseException as exc:  # surfaced by stop()
            self._error = exc

    def stop(self, timeout: float = 30.0) -> list[ProducedRecord]:
        self._stop.set()
        self._thread.join(timeout)
        remaining = self._producer.flush(timeout)
        self._producer = None  # type: ignore[assignment]  # librdkafka threads end with the last reference
        if self._error is not None:
            raise ProduceFailed(f"background producer to {self.topic} crashed: {self._error!r}")
        if remaining or self._reports.failed:
            raise ProduceFailed(f"background producer to {self.topic}: {remaining} undelivered, "
                                f"failures: {self._reports.failed[:5]}")
        return list(self._reports.delivered)

    def wait_sent(self, count: int, timeout: float) -> None:
        wait_until(lambda: self._sent >= count or not self._thread.is_alive(), timeout, 0.01,
                   lambda: f"background producer to send {count} (sent {self._sent})")
        if self._sent < count:
            raise ProduceFailed(f"background producer stopped after {self._sent}/{count}: {self._error!r}")
