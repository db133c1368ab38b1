"""A real kcoord state topic holding a `connect` group (issue 18, seed 001) beside a consumer
group, for the offsets tools: what `kcoord serve` itself wrote in front of Tansu.

- three Python connect workers (members/connect/, asyncio driver, as C11 runs them) join
  one connect group and converge on 2 connectors x (connector + 2 tasks) = 6 units;
- a librdkafka consumer (classic protocol, `subscribe`) reads every record of a 2-partition
  topic in a consumer group, commits synchronously and closes: an Empty classic group whose
  committed offsets are the topic's end offsets.

The workers keep running until `stop_workers()` (they leave, revoking first), so a test can
look at the log while the group has workers and after it is empty. Ports come from
KCOORD_TEST_PORTS (support.ports), not from this suite's fixed range.
"""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer

from members.connect.assignor import IncrementalCooperativeAssignor
from members.connect.driver import ConnectDriver, WorkerListener
from members.connect.worker import ConnectWorker, State
from support.admin import create_topic
from support.kcoord import FAST, KcoordProcess
from support.tansu import TansuBroker
from support.wait import wait_until

CONNECTORS = ("orders-sink", "users-source")
UNITS = frozenset((c, t) for c in CONNECTORS for t in (-1, 0, 1))   # task -1: the connector itself
TOPIC, TOPIC_PARTITIONS, PER_PARTITION = "connect-log-orders", 2, 5
STATE_PARTITIONS = 2


class _Owned(WorkerListener):
    def __init__(self) -> None:
        self.owned: set = set()

    async def on_assign(self, units) -> None:
        self.owned |= set(units)

    async def on_revoke(self, units) -> None:
        self.owned -= set(units)

    async def on_lost(self, units) -> None:
        self.owned -= set(units)


@dataclass
class ConnectLog:
    tansu: TansuBroker
    kcoord: KcoordProcess
    connect_group: str
    consumer_group: str
    workers: list[ConnectWorker] = field(default_factory=list)
    listeners: list[_Owned] = field(default_factory=list)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)   # (topic, partition) -> offset
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _stops: list = field(default_factory=list)
    _runs: list = field(default_factory=list)

    @property
    def state_topic(self) -> str:
        return self.kcoord.state_topic

    @property
    def upstream(self) -> str:
        return self.tansu.bootstrap

    def owned_by_member(self) -> dict[str, frozenset]:
        return {w.member_id: frozenset(x.owned) for w, x in zip(self.workers, self.listeners)}

    # ------------------------------------------------------------------ workers
    def start_workers(self, count: int = 3) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="connect-log-workers")
        self._thread.start()

        async def make_stop() -> asyncio.Event:
            return asyncio.Event()

        for i in range(count):
            listener = _Owned()
            worker = ConnectWorker(self.connect_group, IncrementalCooperativeAssignor(
                lambda: UNITS, url=f"http://w-{i}:8083", scheduled_rebalance_max_delay_ms=2_000),
                rebalance_timeout_ms=10_000)
            stop = asyncio.run_coroutine_threadsafe(make_stop(), self._loop).result(5)
            self._runs.append(asyncio.run_coroutine_threadsafe(
                ConnectDriver(worker, self.kcoord.bootstrap, listener).run(stop), self._loop))
            self._stops.append(stop)
            self.workers.append(worker)
            self.listeners.append(listener)

        def converged() -> bool:
            sets = [x.owned for x in self.listeners]
            return (sum(len(s) for s in sets) == len(UNITS) and frozenset().union(*sets) == UNITS
                    and all(w.state is State.STABLE and w.owned == w.target for w in self.workers))

        wait_until(converged, 60, message=lambda: f"{len(UNITS)} units over {count} workers: "
                                                  f"{[sorted(x.owned) for x in self.listeners]}")

    def stop_workers(self) -> None:
        """Each worker leaves (epoch -1, after revoking its units); returns once all are gone."""
        if self._loop is None:
            return
        for stop in self._stops:
            self._loop.call_soon_threadsafe(stop.set)
        errors = []
        for run in self._runs:
            try:
                run.result(30)
            except BaseException as e:   # noqa: BLE001 - reported below, after every worker stopped
                errors.append(e)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop, self._stops, self._runs = None, [], []
        assert not errors, f"connect workers failed while leaving: {errors}"

    # ------------------------------------------------------------------ consumer group
    def consume_and_commit(self) -> None:
        create_topic(self.upstream, TOPIC, TOPIC_PARTITIONS)
        producer = Producer({"bootstrap.servers": self.upstream, "batch.num.messages": 1, "linger.ms": 0})
        for p in range(TOPIC_PARTITIONS):
            for i in range(PER_PARTITION):
                producer.produce(TOPIC, value=f"{p}-{i}".encode(), partition=p)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": self.kcoord.bootstrap, "group.id": self.consumer_group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000})
        seen: dict[int, int] = {}
        try:
            consumer.subscribe([TOPIC])

            def read_all() -> bool:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    seen[msg.partition()] = max(seen.get(msg.partition(), -1), msg.offset())
                return len(seen) == TOPIC_PARTITIONS and all(o == PER_PARTITION - 1 for o in seen.values())

            wait_until(read_all, 60, 0, message=lambda: f"all records of {TOPIC}: last offsets {seen}")
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()       # LeaveGroup: the group is Empty, its offsets stay
        self.committed = {(TOPIC, p): PER_PARTITION for p in range(TOPIC_PARTITIONS)}


def build(tansu: TansuBroker, state_topic: str, connect_group: str, consumer_group: str) -> ConnectLog:
    kcoord = KcoordProcess(upstream=tansu.bootstrap, state_topic=state_topic,
                           state_partitions=STATE_PARTITIONS, config=FAST).start()
    log = ConnectLog(tansu, kcoord, connect_group, consumer_group)
    log.start_workers()
    log.consume_and_commit()
    return log
