"""aiokafka with KIP-848 membership through a real kcoord (issue 17): two `Kip848Consumer`s
(members/aiokafka_consumer.py: aiokafka fetches, the library's member owns the group
and the offsets) consume a 4-partition topic; one leaves (revoke -> commit v9 with its
member epoch -> release) and the other finishes it. Every record is consumed, and the
commits made with member epochs (KIP-848/KIP-1251) are accepted: nothing is read twice.
Run twice: with the server assignor, and with client assignors (the sample sticky assignor
on kcoord's private key 32700: one member computes the assignment, seed 000)."""
from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from members.aiokafka_consumer import Kip848Consumer
from members.sticky import StickyAssignor
from support.admin import create_topic
from support.produce import produce_records
from support.raw_client import call_with

PARTITIONS = 4


async def _until(predicate, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("assignor", ["server", "client"])
def test_two_aiokafka_members_consume_everything_once(kcoord, names, assignor):
    bootstrap = kcoord.bootstrap
    topic, group = names.topic(), names.group()
    create_topic(bootstrap, topic, PARTITIONS)
    first = produce_records(bootstrap, topic, 200)
    expected = {(r.partition, r.offset) for r in first}
    seen: Counter = Counter()

    async def main():
        def assignors():
            return [StickyAssignor()] if assignor == "client" else []
        a = Kip848Consumer(bootstrap, group, [topic], rebalance_timeout_ms=10_000, assignors=assignors())
        b = Kip848Consumer(bootstrap, group, [topic], rebalance_timeout_ms=10_000, assignors=assignors())
        running = {"a": True, "b": True}

        async def consume(c: Kip848Consumer, key: str):
            while running[key]:
                for tp, records in (await c.getmany(timeout_ms=100)).items():
                    for r in records:
                        seen[(tp.partition, r.offset)] += 1
                await c.commit()

        await a.start()
        await b.start()
        tasks = [asyncio.create_task(consume(a, "a")), asyncio.create_task(consume(b, "b"))]
        try:
            await _until(lambda: len(a.assignment()) == len(b.assignment()) == 2, 60, "a 2/2 split")
            described = (await asyncio.to_thread(call_with, bootstrap, 69, 1, group_ids=(group,),
                                                 include_authorized_operations=False)).groups[0]
            # client mode: the target came from a member's Install with the sticky assignor
            assert described.assignor_name == ("sticky" if assignor == "client" else "uniform")
            await _until(lambda: len(set(seen) & expected) >= 100, 60, "half of the records")
            running["a"] = False
            await tasks[0]
            await a.stop()                                  # leave: revoke, commit, release
            assert a.assignment() == set()
            await _until(lambda: len(b.assignment()) == PARTITIONS, 60, "b owns every partition")
            more = await asyncio.to_thread(produce_records, bootstrap, topic, 100)
            expected.update((r.partition, r.offset) for r in more)
            await _until(lambda: expected <= set(seen), 60,
                         f"every record consumed ({len(expected - set(seen))} missing)")
        finally:
            running["a"] = running["b"] = False
            await asyncio.gather(*tasks, return_exceptions=True)
            await b.stop()
            if a._task is not None and not a._task.done():
                await a.stop()

    asyncio.run(main())
    duplicates = {k: n for k, n in seen.items() if n > 1}
    assert duplicates == {}, f"read twice: {sorted(duplicates)[:10]}"
