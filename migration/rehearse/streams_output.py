"""The Streams rehearsal's reader of the application's output topic: the latest count per word.

Under exactly_once_v2 it reads ``read_committed``, as a downstream consumer of an EOS
application does: only records of committed transactions. Such a consumer gets nothing at or
beyond the partition's last stable offset (LSO: the first offset of the oldest transaction
still open, else the high watermark; KIP-98), so a read aims at the LSO, asked for with
ListOffsets at isolation READ_COMMITTED, and ends once the consumer is there. A transaction
still open does not hold the read until its budget runs out. A ``read_uncommitted`` read
aims at the high watermark.
"""
from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec


class OutputReader:
    """The latest count per word on the output topic (one partition), read as it grows."""

    def __init__(self, bootstrap: str, topic: str, read_committed: bool = False) -> None:
        self.isolation = "read_committed" if read_committed else "read_uncommitted"
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                                  "enable.auto.commit": False, "client.id": "kcoord-rehearse-output",
                                  "enable.partition.eof": True, "isolation.level": self.isolation})
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "kcoord-rehearse-output-end"})
        self.partition = TopicPartition(topic, 0)
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.counts: dict[str, int] = {}
        self.records = 0             # records read, every read together
        self.read_to = 0             # the consumer has passed every offset below this one
        self.end: int | None = None  # where the last read aimed (None: the end could not be asked)
        self.reached_end = False     # whether the last read got there (else its budget ran out)

    def end_offset(self, timeout: float = 5.0) -> int | None:
        """The offset a consumer of this isolation level can read up to now: the LSO under
        read_committed, else the high watermark; None when the cluster did not answer."""
        level = IsolationLevel.READ_COMMITTED if self.isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
        try:
            futures = self.admin.list_offsets({self.partition: OffsetSpec.latest()}, isolation_level=level,
                                              request_timeout=timeout)
            return int(futures[self.partition].result(timeout).offset)
        except (KafkaException, TimeoutError, KeyError):
            return None

    def read(self, budget_s: float = 1.0) -> dict[str, int]:
        """Everything readable up to the end when called (end_offset), bounded by ``budget_s``;
        with no end to aim at, whatever arrives within the budget."""
        end = self.end_offset()
        deadline = time.monotonic() + budget_s
        while (end is None or self.read_to < end) and time.monotonic() < deadline:
            for m in self.consumer.consume(500, 0.2):
                error, offset = m.error(), m.offset()
                if error is not None:
                    # At the end of what the isolation level lets it read, the event carries the
                    # fetch position: past transaction markers and records it does not get.
                    if error.code() == KafkaError._PARTITION_EOF and offset is not None:
                        self.read_to = max(self.read_to, offset)
                    continue
                key, value = m.key(), m.value()
                self.records += 1
                if offset is not None:
                    self.read_to = max(self.read_to, offset + 1)
                if isinstance(key, bytes) and isinstance(value, bytes):
                    self.counts[key.decode()] = int(value.decode())
        self.end, self.reached_end = end, end is not None and self.read_to >= end
        return dict(self.counts)

    def summary(self) -> dict[str, Any]:
        """How the last read went, for the report: ``records`` below ``end`` are what the
        consumer got; under read_committed the offsets it did not get are transaction markers
        and aborted records."""
        return {"isolation": self.isolation, "records": self.records, "end_offset": self.end,
                "reached_end": self.reached_end}

    def close(self) -> None:
        self.consumer.close()
