"""The state topic on a real broker: large atomic writes and a reload that sees them."""
from __future__ import annotations

import asyncio

from coordinator.runtime.state_topic import StateTopic


def test_a_write_larger_than_aiokafkas_default_batch_lands_as_one_batch(tansu, names):
    """Coordinator results are appended atomically; a join storm writes hundreds of KB."""
    async def run():
        topic = StateTopic(tansu.bootstrap, f"__kcoord_{names.topic()}", 2, max_batch_bytes=4 * 1024 * 1024)
        await topic.start()
        try:
            records = [(b"k%06d" % i, b"v" * 1000) for i in range(1000)]  # ~1 MB
            base = await topic.append(1, records, 0)
            loaded = []
            ends = {}
            await topic.load([1], lambda p, o, k, v: loaded.append((o, k)), lambda p, leo: ends.update({p: leo}))
            return base, loaded, ends
        finally:
            await topic.stop()

    base, loaded, ends = asyncio.run(run())
    assert base == 0 and ends == {1: 1000}
    assert [k for _, k in loaded] == [b"k%06d" % i for i in range(1000)]
