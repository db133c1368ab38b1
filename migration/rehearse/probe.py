"""Samples the group while the rehearsal runs: its type, state, epochs and members
(group_admin.GroupAdmin) and its committed offsets (OffsetFetch through an AdminClient),
every `interval` seconds on a thread of its own, all stamped on CLOCK_MONOTONIC."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from .group_admin import GroupAdmin, GroupView


@dataclass(frozen=True, slots=True)
class GroupSample:
    t_ns: int
    view: GroupView
    offsets: dict[int, int] | None  # partition -> committed offset; None when the read failed


class OffsetReader:
    """Committed offsets of the group for every partition of the topic (a missing one is left out)."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "kcoord-rehearse-offsets"})
        self.request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
        self.group = group

    def read(self, timeout: float = 5.0) -> dict[int, int] | None:
        try:
            result = self.admin.list_consumer_group_offsets([self.request], request_timeout=timeout)
            tps = result[self.group].result(timeout)
        except (KafkaException, TimeoutError, RuntimeError):
            return None
        return {tp.partition: tp.offset for tp in tps.topic_partitions if tp.error is None and tp.offset >= 0}


class GroupProbe:
    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int, interval: float = 0.25) -> None:
        self.admin = GroupAdmin(bootstrap, group, topic)
        self.offsets = OffsetReader(bootstrap, group, topic, partitions)
        self.interval = interval
        self._samples: list[GroupSample] = []
        self._cond = threading.Condition()
        self._describing = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="group-probe", daemon=True)

    def start(self) -> GroupProbe:
        self._thread.start()
        return self

    def stop(self, final_sample: bool = True) -> None:
        """Stop sampling; with ``final_sample``, take one last sample (e.g. of the emptied group)."""
        self._stop.set()
        self._thread.join(30)
        if final_sample:
            self.sample_now()
        self.admin.close()

    def sample_now(self) -> GroupSample:
        with self._describing:  # one request at a time on the admin connection
            view = self.admin.describe()
        sample = GroupSample(time.monotonic_ns(), view, self.offsets.read())
        with self._cond:
            self._samples.append(sample)
            self._cond.notify_all()
        return sample

    def samples(self) -> list[GroupSample]:
        with self._cond:
            return list(self._samples)

    def latest(self) -> GroupSample | None:
        with self._cond:
            return self._samples[-1] if self._samples else None

    def wait_for(self, predicate: Callable[[GroupSample], bool], timeout: float,
                 after_ns: int = 0) -> GroupSample | None:
        """The first sample taken after ``after_ns`` that satisfies ``predicate``, or None at the timeout."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for s in self._samples[seen:]:
                    if s.t_ns > after_ns and predicate(s):
                        return s
                seen = len(self._samples)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(min(remaining, 0.2))

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.sample_now()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))
