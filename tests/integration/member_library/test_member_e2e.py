"""The member library (members/) through a real kcoord in front of a real broker (issue 17):
two Python KIP-848 members (asyncio driver, server assignor) and one librdkafka consumer
(group.protocol=consumer) share a 12-partition topic. They converge to 4/4/4; one Python
member leaves gracefully and the other two take over its partitions. No partition is ever
owned by two members (support.ownership ledger, fed by every member's callbacks)."""
from __future__ import annotations

import asyncio
import threading
import time
import uuid

from members.consumer import ConsumerMember
from members.driver import Listener, MemberDriver
from support.admin import create_topic
from support.ownership import OwnershipLedger
from support.raw_client import call_with
from support.wait import wait_until

PARTITIONS = 12


def topic_id_of(bootstrap: str, topic: str) -> uuid.UUID:
    from kio.schema.metadata.v12.request import MetadataRequestTopic
    meta = call_with(bootstrap, 3, 12, topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                     allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return meta.topics[0].topic_id


class LedgerListener(Listener):
    def __init__(self, name: str, ledger: OwnershipLedger, names: dict[uuid.UUID, str]) -> None:
        self.name, self.ledger, self.names = name, ledger, names
        self.owned: set[tuple[str, int]] = set()

    def _tps(self, partitions):
        return [(self.names.get(t, str(t)), p) for t, ps in partitions.items() for p in ps]

    async def on_assign(self, partitions) -> None:
        tps = self._tps(partitions)
        self.ledger.record(time.monotonic_ns(), self.name, "assigned", tps)   # stamped on entry
        self.owned |= set(tps)

    async def on_revoke(self, partitions) -> None:
        tps = self._tps(partitions)
        self.owned -= set(tps)
        self.ledger.record(time.monotonic_ns(), self.name, "revoked", tps)    # stamped on exit

    async def on_lost(self, partitions) -> None:
        tps = self._tps(partitions)
        self.owned -= set(tps)
        self.ledger.record(time.monotonic_ns(), self.name, "lost", tps)


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="members-loop")
        self.thread.start()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_python_members_and_librdkafka_share_a_group(kcoord, names, ledger: OwnershipLedger, drivers):
    from support.rdkafka import RdkafkaConsumer

    bootstrap = kcoord.bootstrap
    topic, group = names.topic(), names.group()
    create_topic(bootstrap, topic, PARTITIONS)
    tid = topic_id_of(bootstrap, topic)
    loop = LoopThread()
    stops: list[asyncio.Event] = []
    futures = []
    listeners = []

    async def make_stop() -> asyncio.Event:
        return asyncio.Event()

    try:
        for i in range(2):
            listener = LedgerListener(f"py-{i}", ledger, {tid: topic})
            member = ConsumerMember(group, [topic], rebalance_timeout_ms=10_000)
            stop = loop.run(make_stop()).result(5)
            futures.append(loop.run(MemberDriver(member, bootstrap, listener).run(stop)))
            stops.append(stop)
            listeners.append(listener)
        rd = drivers.add(RdkafkaConsumer(bootstrap, topic, group, member="rd-1", ledger=ledger,
                                         group_protocol="consumer")).start()

        def split():
            sets = [frozenset(x.owned) for x in listeners] + [frozenset(rd.assignment())]
            return sets if sorted(len(s) for s in sets) == [4, 4, 4] and \
                len(frozenset().union(*sets)) == PARTITIONS else None
        wait_until(split, 60, message=lambda: f"4/4/4 split: {[sorted(x.owned) for x in listeners]}, "
                                              f"{sorted(rd.assignment())}")

        loop.loop.call_soon_threadsafe(stops[0].set)          # py-0 leaves gracefully
        futures[0].result(30)                                  # the leave heartbeat was answered
        assert listeners[0].owned == set()

        def taken_over():
            sets = [frozenset(listeners[1].owned), frozenset(rd.assignment())]
            return sorted(len(s) for s in sets) == [6, 6] and len(sets[0] | sets[1]) == PARTITIONS
        wait_until(taken_over, 60, message=lambda: f"6/6 after the leave: {sorted(listeners[1].owned)}, "
                                                   f"{sorted(rd.assignment())}")
        ledger.assert_no_double_ownership()
        assert not [e for e in rd.errors() if e.get("fatal")]
    finally:
        for stop in stops:
            loop.loop.call_soon_threadsafe(stop.set)
        for f in futures:
            try:
                f.result(30)
            except Exception:   # noqa: BLE001 - the assertion above already reported what matters
                pass
        loop.close()
