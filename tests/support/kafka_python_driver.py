"""kafka-python consumer driver (classic protocol only: the client has no group.protocol option).

One KafkaConsumer on its own thread; same event interface as the other drivers.
kafka-python 3.x calls on_partitions_revoked from close() before leaving (as Java's
onLeavePrepare does), so close() reports the revocation through the listener.
Its listeners run on the client's IO loop, where blocking calls such as commit() raise
("Cannot block on net.run() from the IO thread"), so the listener is the async variant
and awaits commit_async()'s future. Against Tansu its LeaveGroup works (group goes EMPTY).
"""
from __future__ import annotations

from typing import Any

from kafka import AsyncConsumerRebalanceListener, KafkaConsumer
from kafka.errors import KafkaError

from .consumer_events import PythonClientConsumer, partitions_field


class _Listener(AsyncConsumerRebalanceListener):
    def __init__(self, driver: KafkaPythonConsumer) -> None:
        self.driver = driver

    async def on_partitions_assigned(self, assigned) -> None:  # type: ignore[no-untyped-def]
        self.driver.log.emit("assigned", partitions=partitions_field((tp.topic, tp.partition) for tp in assigned))

    async def on_partitions_revoked(self, revoked) -> None:  # type: ignore[no-untyped-def]
        consumer = self.driver._consumer
        if revoked and consumer is not None:
            try:
                await consumer.commit_async()  # a kafka.future.Future: awaitable on the IO loop
                # position() may block, which the IO loop forbids: report what this driver consumed.
                consumed = self.driver._next_offsets
                self.driver.log.emit("committed", reason="revoke", offsets=[
                    [tp.topic, tp.partition, consumed[tp]] for tp in sorted(revoked) if tp in consumed])
            except KafkaError as exc:
                self.driver.log.emit("error", error=type(exc).__name__, message=f"commit on revoke: {exc}",
                                     fatal=False)
        self.driver.log.emit("revoked", partitions=partitions_field((tp.topic, tp.partition) for tp in revoked))

    async def on_partitions_lost(self, lost) -> None:  # type: ignore[no-untyped-def]
        self.driver.log.emit("lost", partitions=partitions_field((tp.topic, tp.partition) for tp in lost))


class KafkaPythonConsumer(PythonClientConsumer):
    name_prefix = "kp"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next_offsets: dict = {}  # TopicPartition -> offset after the last record consumed

    def _run(self) -> None:
        try:
            consumer = self._consumer = KafkaConsumer(**self.config)
            consumer.subscribe(self.topics, listener=_Listener(self))
            self.log.emit("ready", protocol="classic")
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=100, max_records=500)
                for tp, records in batches.items():
                    for r in records:
                        self._next_offsets[tp] = r.offset + 1
                        self.log.emit("record", topic=tp.topic, partition=tp.partition, offset=r.offset,
                                      value=r.value.decode(errors="replace") if r.value is not None else None,
                                      key=r.key.decode(errors="replace") if r.key is not None else None)
                if batches and self.commit_mode == "manual":
                    self._commit("batch")
            if self.commit_mode == "manual":
                self._commit("close")
            consumer.close(autocommit=self.commit_mode == "auto")  # revokes via the listener, then LeaveGroup
            self.log.emit("closed")
        except BaseException as exc:
            self._failure = exc
            self.log.emit("error", error=type(exc).__name__, message=str(exc), fatal=True)

    def _commit(self, reason: str) -> None:
        assert self._consumer is not None
        try:
            owned = self._consumer.assignment()
            if owned:
                self._consumer.commit()  # synchronous; commits the consumed positions
                self.log.emit("committed", reason=reason, offsets=[
                    [tp.topic, tp.partition, self._consumer.position(tp)] for tp in sorted(owned)])
        except KafkaError as exc:
            self.log.emit("error", error=type(exc).__name__, message=f"commit on {reason}: {exc}", fatal=False)
