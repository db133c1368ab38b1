"""A17 (seed-drafts.md §4; issue 17 point 4): client-side assignors end to end, through a
real kcoord in front of a real broker.

Three Python members (members/, asyncio driver) bring the sample sticky assignor and
heartbeat on kcoord's private key 32700: the group is in client mode and one of them
computes 4/4/4 (Prepare -> assign -> Install). A librdkafka consumer joins (key 68): the
group switches to server mode and the four share 12 partitions 3/3/3/3. Then:
- a Python member is killed (no leave): every partition is owned again within 2 s of its
  session timeout (3 s here);
- another leaves gracefully: every partition is owned again within 2 s of the leave.
No partition is ever owned by two members (support.ownership ledger, fed by every
member's callbacks; a killed member's partitions are recorded lost when it dies).

The Python members run membership only (members/driver.py), so "owned again" is measured
on the survivors' assignments; librdkafka's side is its own assignment.
"""
from __future__ import annotations

import asyncio
import time

from members.consumer import ConsumerMember
from members.driver import MemberDriver
from members.sticky import StickyAssignor
from support.admin import create_topic
from support.kcoord import FAST, KcoordProcess
from support.ownership import OwnershipLedger
from support.wait import wait_until

from .test_member_e2e import LedgerListener, LoopThread, topic_id_of

PARTITIONS = 12
SESSION_MS = 3_000
CONFIG = (*[c for c in FAST if not c.startswith("consumer_session_timeout_ms")],
          f"consumer_session_timeout_ms={SESSION_MS}", f"consumer_min_session_timeout_ms={SESSION_MS}")


def test_a17_sticky_python_members_and_librdkafka(upstream, names, ledger: OwnershipLedger, drivers):
    from support.rdkafka import RdkafkaConsumer

    kcoord = KcoordProcess(upstream=upstream.bootstrap, state_topic=f"__kcoord_{names.topic()}",
                           config=CONFIG).start()
    loop = LoopThread()
    stops: list[asyncio.Event] = []
    futures = []
    listeners: list[LedgerListener] = []
    try:
        bootstrap = kcoord.bootstrap
        topic, group = names.topic(), names.group()
        create_topic(bootstrap, topic, PARTITIONS)
        tid = topic_id_of(bootstrap, topic)

        async def make_stop() -> asyncio.Event:
            return asyncio.Event()

        for i in range(3):
            listener = LedgerListener(f"py-{i}", ledger, {tid: topic})
            member = ConsumerMember(group, [topic], rebalance_timeout_ms=10_000, assignors=[StickyAssignor()])
            stop = loop.run(make_stop()).result(5)
            futures.append(loop.run(MemberDriver(member, bootstrap, listener).run(stop)))
            stops.append(stop)
            listeners.append(listener)

        def covered(sets, sizes):
            return sorted(len(s) for s in sets) == sizes and len(frozenset().union(*sets)) == PARTITIONS

        wait_until(lambda: covered([x.owned for x in listeners], [4, 4, 4]), 60,
                   message=lambda: f"client mode 4/4/4: {[sorted(x.owned) for x in listeners]}")
        assert kcoord.process is not None and kcoord.process.poll() is None

        rd = drivers.add(RdkafkaConsumer(bootstrap, topic, group, member="rd-1", ledger=ledger,
                                         group_protocol="consumer")).start()
        wait_until(lambda: covered([x.owned for x in listeners] + [set(rd.assignment())], [3, 3, 3, 3]), 60,
                   message=lambda: f"3/3/3/3: {[sorted(x.owned) for x in listeners]}, {sorted(rd.assignment())}")

        # kill py-1: its driver is cancelled, nothing is sent, its connection closes
        killed = listeners[1]
        futures[1].cancel()
        killed_at = time.monotonic()
        ledger.record(time.monotonic_ns(), killed.name, "lost", sorted(killed.owned))
        killed.owned = set()
        survivors = [listeners[0], listeners[2]]
        wait_until(lambda: covered([x.owned for x in survivors] + [set(rd.assignment())], [4, 4, 4]),
                   SESSION_MS / 1000 + 2 + 1,
                   message=lambda: f"4/4/4 after the kill: {[sorted(x.owned) for x in survivors]}, "
                                   f"{sorted(rd.assignment())}")
        took = time.monotonic() - killed_at
        assert took <= SESSION_MS / 1000 + 2, f"partitions owned again {took:.1f}s after the kill"

        # py-0 leaves gracefully
        loop.loop.call_soon_threadsafe(stops[0].set)
        left_at = time.monotonic()
        futures[0].result(30)
        assert listeners[0].owned == set()
        wait_until(lambda: covered([listeners[2].owned, set(rd.assignment())], [6, 6]), 3,
                   message=lambda: f"6/6 after the leave: {sorted(listeners[2].owned)}, {sorted(rd.assignment())}")
        took = time.monotonic() - left_at
        assert took <= 2, f"partitions owned again {took:.1f}s after the leave"

        ledger.assert_no_double_ownership()
        assert not [e for e in rd.errors() if e.get("fatal")]
    finally:
        for stop in stops:
            loop.loop.call_soon_threadsafe(stop.set)
        for f in futures:
            try:
                f.result(30)
            except BaseException:   # noqa: BLE001 - the killed one was cancelled; assertions above report
                pass
        loop.close()
        if kcoord.process is not None and kcoord.process.poll() is None:
            kcoord.stop()
