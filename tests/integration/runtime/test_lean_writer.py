"""The lean state-topic writer (coordinator/runtime/lean_writer.py) through StateTopic on a
real upstream (Tansu and Kafka 4.4): shards' batches written concurrently land whole, each at
the offset its append was answered with, as idempotent batches; a reload reads back exactly
what was acknowledged; a write to a missing topic creates nothing."""
from __future__ import annotations

import asyncio

import pytest

from coordinator.runtime.state_topic import StateTopic
from support.admin import admin_client

PARTITIONS = 4


def test_concurrent_shard_batches_land_whole_and_a_reload_reads_what_was_acknowledged(upstream, names):
    name = f"__kcoord_{names.topic()}"

    async def run():
        topic = StateTopic(upstream.bootstrap, name, PARTITIONS)
        await topic.start()
        answered: dict[int, list[tuple[int, list]]] = {p: [] for p in range(PARTITIONS)}
        try:
            async def shard(p: int) -> None:
                for round_ in range(5):
                    records = [(f"p{p}r{round_}k{i}".encode(), b"v" * (10 + i)) for i in range(round_ + 1)]
                    answered[p].append((await topic.append(p, records, 1_000 + round_), records))
            await asyncio.gather(*(shard(p) for p in range(PARTITIONS)))
            big = [(b"big%05d" % i, b"x" * 1000) for i in range(1000)]       # ~1 MB, one batch
            answered[0].append((await topic.append(0, big, 2_000), big))
            lean = topic._lean
            assert lean is not None and lean.producer_id >= 0
            sent = (lean.requests_sent, lean.batches_sent)
        finally:
            await topic.stop()
        # Another process: the same state topic read from its start (restart = reload).
        reader = StateTopic(upstream.bootstrap, name, PARTITIONS)
        loaded: dict[int, list[tuple[int, bytes, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
        ends: dict[int, int] = {}
        await reader.load(range(PARTITIONS), lambda p, o, k, v: loaded[p].append((o, k, v)),
                          lambda p, end: ends.update({p: end}))
        return answered, loaded, ends, sent

    answered, loaded, ends, (requests, batches) = asyncio.run(asyncio.wait_for(run(), 120))
    # Batches sent, resends included (a new topic's leaders may still be moving on Kafka).
    assert batches >= 5 * PARTITIONS + 1 and requests <= batches
    for p in range(PARTITIONS):
        expected = [(base + i, k, v) for base, records in answered[p] for i, (k, v) in enumerate(records)]
        assert loaded[p] == expected, f"partition {p}"
        assert ends[p] == len(expected)
        # Each append's records are contiguous from its answered offset, in append order.
        bases = [base for base, _ in answered[p]]
        assert bases == sorted(bases) and bases[0] == 0


def test_a_write_to_a_missing_state_topic_fails_and_creates_nothing(upstream, names):
    """The lean writer asks Metadata without auto-creation (Tansu would create a 4-partition,
    uncompacted topic)."""
    present, missing = f"__kcoord_{names.topic()}", f"__kcoord_{names.topic()}"

    async def run():
        topic = StateTopic(upstream.bootstrap, present, 1)
        await topic.start()
        topic.topic = topic._lean.topic = topic._lean.links.topic = missing    # type: ignore[union-attr]
        topic._lean.delivery_timeout_s = 3.0                                    # type: ignore[union-attr]
        try:
            with pytest.raises(Exception) as failed:
                await topic.append(0, [(b"k", b"v")], 0)
            return failed.value
        finally:
            await topic.stop()

    error = asyncio.run(asyncio.wait_for(run(), 60))
    assert missing in str(error), repr(error)
    listed = admin_client(upstream.bootstrap).list_topics(timeout=10).topics
    assert missing not in listed
