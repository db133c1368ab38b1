"""aiokafka consumer driver (classic protocol only), on a thread running its own event loop.

Same event interface as the other drivers. Two aiokafka facts shape it:
- AIOKafkaConsumer.stop() does not call the rebalance listener, so close() commits and
  reports "revoked" for the whole assignment itself before stopping.
- Tansu ignores aiokafka's LeaveGroup (v0/v1): after close() the member stays as a ghost
  until its session expires, so the next join to that group waits out session.timeout.ms
  (environment.md 3.4.3). Keep session_timeout_ms low.
"""
from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.errors import KafkaError

from .consumer_events import PythonClientConsumer, partitions_field


class _Listener(ConsumerRebalanceListener):
    def __init__(self, driver: AiokafkaConsumer) -> None:
        self.driver = driver

    async def on_partitions_revoked(self, revoked) -> None:  # type: ignore[no-untyped-def]
        if revoked:
            await self.driver._commit("revoke")
        self.driver.log.emit("revoked", partitions=partitions_field((tp.topic, tp.partition) for tp in revoked))

    async def on_partitions_assigned(self, assigned) -> None:  # type: ignore[no-untyped-def]
        self.driver.log.emit("assigned", partitions=partitions_field((tp.topic, tp.partition) for tp in assigned))


class AiokafkaConsumer(PythonClientConsumer):
    name_prefix = "aio"

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        try:
            consumer = self._consumer = AIOKafkaConsumer(**self.config)
            await consumer.start()
            try:
                consumer.subscribe(self.topics, listener=_Listener(self))
                self.log.emit("ready", protocol="classic")
                while not self._stop.is_set():
                    batches = await consumer.getmany(timeout_ms=100, max_records=500)
                    for tp, records in batches.items():
                        for r in records:
                            self.log.emit("record", topic=tp.topic, partition=tp.partition, offset=r.offset,
                                          value=r.value.decode(errors="replace") if r.value is not None else None,
                                          key=r.key.decode(errors="replace") if r.key is not None else None)
                    if batches and self.commit_mode == "manual":
                        await self._commit("batch")
                await self._commit("close")
                owned = consumer.assignment()
                self.log.emit("revoked", time.monotonic_ns(),
                              partitions=partitions_field((tp.topic, tp.partition) for tp in owned))
            finally:
                await consumer.stop()  # LeaveGroup: ignored by Tansu (see module doc)
            self.log.emit("closed")
        except BaseException as exc:
            self._failure = exc
            self.log.emit("error", error=type(exc).__name__, message=str(exc), fatal=True)

    async def _commit(self, reason: str) -> None:
        assert self._consumer is not None
        try:
            offsets = {tp: await self._consumer.position(tp) for tp in self._consumer.assignment()}
            if offsets:
                await self._consumer.commit(offsets)
                self.log.emit("committed", reason=reason,
                              offsets=[[tp.topic, tp.partition, off] for tp, off in sorted(offsets.items())])
        except KafkaError as exc:
            self.log.emit("error", error=type(exc).__name__, message=f"commit on {reason}: {exc}", fatal=False)
