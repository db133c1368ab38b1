"""The `fencing=epoch` batches of every shard, coalesced: one ProduceRequest per broker carries
each waiting shard's batch (epoch_producers.py sends through it).

Rules:
- Each batch keeps its own producer id, epoch and sequence (a shard's), and its own
  partition's answer: Kafka validates each partition of a ProduceRequest on its own, and
  batches of different producers in one request are accepted (docs/design/fencing.md).
- At most one request per broker is in flight: batches that arrive meanwhile wait and go
  together in the next one (Kafka serves one request per connection at a time anyway), so
  under load the broker appends many shards' batches per request, as aiokafka's sender does.
- A shard has at most one batch waiting or in flight (its session's lock): a request never
  holds two batches of one partition, so their order is the shard's.
- A request whose link fails fails every batch in it with `StateLogError` (outcome unknown:
  the shards reload). The answer of each partition goes back to its batch as it came.
"""
from __future__ import annotations

import asyncio
from typing import Any

from .fenced_links import StateLogError, UpstreamLinks
from .fenced_producers import produce_request


class _Broker:
    __slots__ = ("waiting", "busy")

    def __init__(self) -> None:
        self.waiting: dict[int, tuple[bytes, asyncio.Future]] = {}
        self.busy = False


class CoalescingSender:
    def __init__(self, links: UpstreamLinks, topic: str, timeout_s: float) -> None:
        self.links = links
        self.topic = topic
        self.timeout_s = timeout_s
        self.brokers: dict[tuple[str, int], _Broker] = {}
        self.requests = 0       # ProduceRequests sent (bench: batches per request)
        self.batches = 0

    async def send(self, address: tuple[str, int], partition: int, batch: bytes) -> Any:
        """Send `batch` to `partition` on the broker at `address` with the other waiting
        shards' batches; the partition's answer (error_code, base_offset)."""
        broker = self.brokers.get(address)
        if broker is None:
            broker = self.brokers[address] = _Broker()
        if partition in broker.waiting:
            raise StateLogError(f"{self.topic}-{partition}: a second batch while one waits")
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        broker.waiting[partition] = (batch, future)
        if not broker.busy:
            asyncio.get_running_loop().create_task(self._drain(address, broker))
            broker.busy = True
        try:
            return await future
        finally:
            if broker.waiting.get(partition, (None, None))[1] is future:
                del broker.waiting[partition]     # cancelled before it was sent

    async def _drain(self, address: tuple[str, int], broker: _Broker) -> None:
        try:
            while broker.waiting:
                batches, broker.waiting = broker.waiting, {}
                await self._produce(address, batches)
        finally:
            broker.busy = False

    async def _produce(self, address: tuple[str, int], batches: dict[int, tuple[bytes, asyncio.Future]]) -> None:
        request = produce_request(self.topic, [(p, b) for p, (b, _) in batches.items()], None, self.timeout_s)
        self.requests += 1
        self.batches += len(batches)
        try:
            response = await self.links.call(address, request)
        except StateLogError as e:
            for _, future in batches.values():
                if not future.done():
                    future.set_exception(e)
            return
        answers = {int(p.index): p for t in response.responses for p in t.partition_responses}
        for p, (_, future) in batches.items():
            if future.done():
                continue
            answer = answers.get(p)
            if answer is None:
                future.set_exception(StateLogError(f"Produce to {self.topic}-{p}: no answer for the partition"))
            else:
                future.set_result(answer)
