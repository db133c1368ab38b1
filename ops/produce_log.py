"""Write an offsets log into a Kafka topic as it was ("topic format"), transactions and all.

Data batches of non-transactional writers go through a plain producer. Each producer
id of the log gets a real transactional producer (confluent-kafka: aiokafka cannot
run transactions against Tansu, environment.md §3.3), whose COMMIT or ABORT makes the
broker write the same control marker. Partition order is kept by flushing a producer
before another one writes to the partition. Producer ids and log offsets are the
broker's own; the replayed state is the same.
"""
from __future__ import annotations

from collections.abc import Iterable

from ops.logsource import LogBatch
from records.batch import ControlMarker


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1,
                                            config={"cleanup.policy": "compact"})])
    try:
        futures[topic].result(timeout)
    except KafkaException as e:
        if "TOPIC_ALREADY_EXISTS" not in str(e):
            raise


class LogProducer:
    def __init__(self, bootstrap: str, topic: str, timeout: float = 30.0) -> None:
        from confluent_kafka import Producer

        self.bootstrap, self.topic, self.timeout = bootstrap, topic, timeout
        self._plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False,
                                "linger.ms": 5, "acks": "all"})
        self._txn: dict[int, object] = {}
        self._open: set[int] = set()
        self._last = None
        self.records = 0
        self.markers = 0

    def _transactional(self, producer_id: int):
        from confluent_kafka import Producer

        p = self._txn.get(producer_id)
        if p is None:
            p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5,
                          "transactional.id": f"kcoord-log-{self.topic}-{producer_id}"})
            p.init_transactions(self.timeout)
            self._txn[producer_id] = p
        return p

    def _switch_to(self, producer) -> None:
        if self._last is not None and self._last is not producer:
            remaining = self._last.flush(self.timeout)
            if remaining:
                raise RuntimeError(f"{remaining} records not delivered to {self.topic}")
        self._last = producer

    def write(self, lb: LogBatch) -> None:
        b = lb.batch
        if b.is_control_batch:
            p = self._txn.get(b.producer_id)
            if p is None or b.producer_id not in self._open:
                return    # a marker for a transaction that left no data here
            self._switch_to(p)
            # abort_transaction purges what is still buffered: send the data first, so the
            # aborted records are in the log as they were in the original.
            p.flush(self.timeout)
            if b.control_type == ControlMarker.COMMIT:
                p.commit_transaction(self.timeout)
            else:
                p.abort_transaction(self.timeout)
            self._open.discard(b.producer_id)
            self.markers += 1
            return
        if b.is_transactional:
            producer = self._transactional(b.producer_id)
            if b.producer_id not in self._open:
                producer.begin_transaction()
                self._open.add(b.producer_id)
        else:
            producer = self._plain
        self._switch_to(producer)
        for r in b.records:
            producer.produce(self.topic, key=r.key, value=r.value, partition=lb.partition,
                             timestamp=r.timestamp)
            self.records += 1
        producer.poll(0)

    def close(self) -> None:
        """Flush everything; transactions still open (the log ended inside them) are left
        to the broker's transaction timeout, as a crashed producer's would be."""
        for p in [self._plain, *self._txn.values()]:
            p.flush(self.timeout)


def produce(bootstrap: str, topic: str, batches: Iterable[LogBatch], partitions: int) -> LogProducer:
    create_topic(bootstrap, topic, partitions)
    out = LogProducer(bootstrap, topic)
    try:
        for lb in batches:
            out.write(lb)
    finally:
        out.close()
    return out
