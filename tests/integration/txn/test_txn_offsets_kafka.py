"""Transactional offsets appended as the client's producer, on real Apache Kafka 4.4 (issue 16,
transactions v2): the shell pieces (coordinator/runtime/txn_offsets_log.py appends,
txn_log_reader.py reads) against the real transaction protocol, the client's side of it
spoken on the wire the way a transactions-v2 producer does (InitProducerId, Produce v12 to
its output topic, EndTxn v5). What this proves:
- Produce v12 with the client's transactional id adds the state partition to the client's
  transaction implicitly, and Kafka's transaction coordinator writes the COMMIT/ABORT marker
  into it: the reader turns that into applied / dropped offsets;
- each transaction of transactions v2 has a new epoch, so its sequence starts at 0 (taken
  from the log by the reader);
- a zombie (an older epoch of the same transactional id) is refused with the error the client
  expects, and its offsets never apply.
Wiring TxnOffsetCommit through a running kcoord (and the Java / librdkafka loops) is the
lead's part (docs/design/transactions.md, "Wiring")."""
from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v7 import request as offset_fetch_v7
from kio.schema.txn_offset_commit.v5 import request as txn_request_v5
from kio.schema.types import ProducerId, TransactionalId
from kio.static.primitive import i16, i32Timedelta

from coordinator.group import record_helpers as rh
from coordinator.group.context import RequestContext
from coordinator.group.image import MetadataImage, TopicImage
from coordinator.group.offsets.txn_commit import replay_pending
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.protocol.apis import request_class
from coordinator.runtime.fenced_state_log import FencedStateLog, StateLogError
from coordinator.runtime.state_topic import StateTopic
from coordinator.runtime.txn_log_reader import ShardTarget, TxnLogReader
from coordinator.runtime.txn_offsets_log import (
    ClientTxnAppender,
    TxnAppendError,
    add_offsets_error,
    add_offsets_request,
    txn_offset_commit_request,
)
from records import decode_record, encode_key, encode_value

_INIT_PRODUCER_ID, _END_TXN = 22, 26
RETRY = {ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
         ErrorCode.concurrent_transactions}


class Client:
    """The transaction-coordinator side of a transactions-v2 producer, on kcoord's own links."""

    def __init__(self, links: FencedStateLog, txn_id: str) -> None:
        self.links, self.txn_id = links, txn_id
        self.pid, self.epoch = -1, -1

    async def _txn_call(self, request, timeout: float = 30.0):
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                address = await self.links._coordinator(self.txn_id)
                response = await self.links._call(address, request)
                code = response.error_code
            except StateLogError:
                code = ErrorCode.coordinator_not_available
            except Exception as e:   # FindCoordinator still answering COORDINATOR_NOT_AVAILABLE
                code = getattr(e, "code", ErrorCode.coordinator_not_available)
            if code is ErrorCode.none:
                return response
            if code not in RETRY or asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{type(request).__name__} for {self.txn_id}: {code.name}")
            self.links._coordinators.pop(self.txn_id, None)
            await asyncio.sleep(0.05)

    async def init(self, timeout_ms: int = 60_000) -> None:
        r = await self._txn_call(request_class(_INIT_PRODUCER_ID, 5)(
            transactional_id=TransactionalId(self.txn_id),
            transaction_timeout=i32Timedelta.parse(timedelta(milliseconds=timeout_ms)),
            producer_id=ProducerId(-1), producer_epoch=i16(-1)))
        self.pid, self.epoch = int(r.producer_id), int(r.producer_epoch)

    async def end(self, committed: bool, version: int = 5) -> None:
        """EndTxn v5: transactions v2 answers the next epoch (KIP-890 part 2); v4 (transactions
        v1) keeps the epoch."""
        r = await self._txn_call(request_class(_END_TXN, version)(
            transactional_id=TransactionalId(self.txn_id), producer_id=ProducerId(self.pid),
            producer_epoch=i16(self.epoch), committed=committed))
        if version >= 5:
            self.epoch = int(r.producer_epoch)

    async def add_offsets(self, topic: str, partition: int) -> ErrorCode:
        """Transactions v1: the AddOffsetsToTxn kcoord intercepts, as AddPartitionsToTxn v3."""
        from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
        req = AddOffsetsToTxnRequest(transactional_id=self.txn_id, producer_id=self.pid,
                                     producer_epoch=self.epoch, group_id="g")
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            response = await self.links._call(await self.links._coordinator(self.txn_id),
                                              add_offsets_request(req, topic, partition))
            code = add_offsets_error(response, 3)
            if code not in RETRY or asyncio.get_running_loop().time() > deadline:
                return code
            await asyncio.sleep(0.05)


def commits(group: str, offsets: dict[int, int]) -> list[tuple[bytes, bytes | None]]:
    out = []
    for partition, offset in offsets.items():
        rec = rh.offset_commit_record(group, "input", partition, offset=offset, leader_epoch=-1, metadata="",
                                      commit_timestamp=1)
        out.append((encode_key(rec.key), encode_value(rec.value, rec.value_version)))
    return out


class Tail:
    """A shard fed by the reader from the state partition (read_uncommitted, markers visible)."""

    def __init__(self, links: FencedStateLog) -> None:
        self.links = links
        self.shard = GroupCoordinatorShard(0)
        self.reader = TxnLogReader(ShardTarget(self.shard, lambda k, v, o: decode_record(k, v, offset=o)))
        self.offset = 0
        self.high_watermark = 0

    async def poll(self) -> None:
        part = await self.links._fetch(0, self.offset, 100)
        if part is not None and part.error_code is ErrorCode.none:
            self.offset = self.reader.feed(part.records or b"", self.offset)
            self.high_watermark = int(part.high_watermark)

    async def until(self, check, what: str, timeout: float = 20.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not check():
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{what}: not seen within {timeout}s (read up to offset {self.offset})")
            await self.poll()

    def committed(self, group: str) -> dict[int, int]:
        return {p: o.offset for p, o in self.shard.offsets.group(group).get("input", {}).items()}


def test_txn_v2_commit_abort_and_zombie_on_kafka_4_3(kafka44, names):
    async def scenario():
        state_topic, output = f"__kcoord_{names.topic()}", names.topic()
        await StateTopic(kafka44.bootstrap, state_topic, 1).ensure_topic()
        await StateTopic(kafka44.bootstrap, output, 1).ensure_topic()
        state = FencedStateLog(kafka44.bootstrap, state_topic, 1, take_on_load=False)
        out = FencedStateLog(kafka44.bootstrap, output, 1, take_on_load=False)
        try:
            await state.start()
            await out.start()

            async def state_leader(p, req):
                return await state._call(await state._leader(p), req)

            async def output_leader(p, req):
                return await out._call(await out._leader(p), req)

            appender = ClientTxnAppender(state_topic, state_leader)
            out_appender = ClientTxnAppender(output, output_leader)
            tail = Tail(state)
            client = Client(state, f"app-{names.group()}")
            await client.init()
            deadline = asyncio.get_running_loop().time() + 30

            async def transaction(offsets: dict[int, int], *, committed: bool, api_version: int = 5):
                await tail.poll()    # the log end and the producer's sequence, from the log
                seq = tail.reader.next_sequence(client.pid, client.epoch)
                await out_appender.append(0, transactional_id=client.txn_id, producer_id=client.pid,
                                          producer_epoch=client.epoch, base_sequence=0,
                                          records=[(b"k", b"v")], timestamp_ms=1, api_version=5,
                                          known_end=0, deadline=deadline)
                appended = await appender.append(0, transactional_id=client.txn_id, producer_id=client.pid,
                                                 producer_epoch=client.epoch, base_sequence=seq,
                                                 records=commits("g", offsets), timestamp_ms=1,
                                                 api_version=api_version, known_end=tail.high_watermark,
                                                 deadline=deadline)
                assert not appended.duplicate and appended.base_offset >= tail.high_watermark
                await tail.until(lambda: tail.shard.offsets.has_pending("g", "input", next(iter(offsets))),
                                 "the pending offsets")
                assert tail.committed("g") != offsets
                epoch_before = client.epoch
                markers = tail.reader.markers
                await client.end(committed)
                assert client.epoch == epoch_before + 1, "transactions v2 bumps the epoch at EndTxn"
                await tail.until(lambda: tail.reader.markers > markers, "the transaction's marker")
                assert not tail.shard.offsets.has_open_transactions("g")
                return seq

            # 1. A committed transaction: its offsets apply at Kafka's COMMIT marker.
            assert await transaction({0: 10, 1: 11}, committed=True) == 0
            assert tail.committed("g") == {0: 10, 1: 11}
            # 2. An aborted one: dropped; the next transaction has a new epoch, so sequence 0.
            assert await transaction({0: 20}, committed=False) == 0
            assert tail.committed("g") == {0: 10, 1: 11}
            # 3. Committed again, on top of the first.
            await transaction({1: 31}, committed=True)
            assert tail.committed("g") == {0: 10, 1: 31}

            # 4. A zombie: the same transactional id initialised again fences the old epoch.
            zombie_epoch = client.epoch
            await Client(state, client.txn_id).init()
            with pytest.raises(TxnAppendError) as refused:
                await appender.append(0, transactional_id=client.txn_id, producer_id=client.pid,
                                      producer_epoch=zombie_epoch, base_sequence=0, records=commits("g", {0: 99}),
                                      timestamp_ms=1, api_version=5, known_end=tail.high_watermark,
                                      deadline=deadline)
            assert refused.value.code in (ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced), \
                refused.value.message
            await tail.poll()
            assert tail.committed("g") == {0: 10, 1: 31}
            assert not tail.shard.offsets.has_pending("g", "input", 0)
        finally:
            await state.stop()
            await out.stop()

    asyncio.run(scenario())


class MarkersOnly:
    """The active shard's tail: its own and its clients' records were replayed when written, so
    only the markers are applied from the log (docs/design/transactions.md, "Wiring")."""

    def __init__(self, shard) -> None:
        self.shard = shard

    def record(self, offset, key, value, producer_id) -> None:
        pass

    def end_transaction(self, offset, producer_id, committed) -> None:
        self.shard.replay_end_transaction(producer_id, committed)


class Port:
    """A TxnShardPort without the runtime: one shard, its tail, a lock for the write order."""

    def __init__(self, links: FencedStateLog) -> None:
        self.tail = Tail(links)
        self.tail.reader = TxnLogReader(MarkersOnly(self.tail.shard))
        self.shard = self.tail.shard
        self._lock = asyncio.Lock()
        self.resyncs = 0

    def check_active(self) -> None:
        pass

    def now_ms(self) -> int:
        return 1_000

    def exclusive_write(self):
        return self._lock

    async def caught_up(self):
        await self.tail.poll()
        while self.tail.offset < self.tail.high_watermark:
            await self.tail.poll()
        return self.tail.reader, self.tail.offset

    def appended(self, write, base_offset: int) -> None:
        replay_pending(self.shard, write, base_offset)

    def resync(self) -> None:
        self.resyncs += 1

    async def barrier(self) -> None:
        pass


def _txn_request(client: Client, offsets: dict[int, int]):
    m = txn_request_v5
    return m.TxnOffsetCommitRequest(
        transactional_id=client.txn_id, group_id="g", producer_id=client.pid, producer_epoch=client.epoch,
        generation_id=-1, member_id="", group_instance_id=None, topics=(m.TxnOffsetCommitRequestTopic(
            name="input", partitions=tuple(m.TxnOffsetCommitRequestPartition(
                partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="")
                for p, o in offsets.items())),))


def _fetch_stable(shard) -> dict:
    m = offset_fetch_v7
    req = m.OffsetFetchRequest(group_id="g", require_stable=True, topics=(
        m.OffsetFetchRequestTopic(name="input", partition_indexes=(0, 1)),))
    resp = shard.offset_fetch(RequestContext(api_version=7), req, 0).response
    return {p.partition_index: (int(p.committed_offset), p.error_code) for t in resp.topics for p in t.partitions}


def test_txn_offset_commit_request_through_the_core_and_kafka_4_3(kafka44, names):
    """The whole request (txn_offset_commit_request): the core validates and builds the records,
    the shell appends them as the client's producer, OffsetFetch(require_stable) answers
    UNSTABLE_OFFSET_COMMIT until Kafka's marker, then the committed offsets."""

    async def scenario():
        state_topic = f"__kcoord_{names.topic()}"
        await StateTopic(kafka44.bootstrap, state_topic, 1).ensure_topic()
        state = FencedStateLog(kafka44.bootstrap, state_topic, 1, take_on_load=False)
        try:
            await state.start()

            async def state_leader(p, req):
                return await state._call(await state._leader(p), req)

            port = Port(state)
            port.shard.image = MetadataImage.of([TopicImage(topic_id=uuid.uuid4(), name="input", num_partitions=2)])
            appender = ClientTxnAppender(state_topic, state_leader)
            client = Client(state, f"app-{names.group()}")
            await client.init()
            ctx = RequestContext(api_version=5)

            async def commit(offsets):
                resp = await txn_offset_commit_request(port, appender, ctx, _txn_request(client, offsets), 30.0)
                return {p.partition_index: p.error_code for t in resp.topics for p in t.partitions}

            assert await commit({0: 5, 1: 6}) == {0: ErrorCode.none, 1: ErrorCode.none}
            assert await commit({0: 7}) == {0: ErrorCode.none}      # a second commit, same transaction
            assert _fetch_stable(port.shard) == {0: (-1, ErrorCode.unstable_offset_commit),
                                                 1: (-1, ErrorCode.unstable_offset_commit)}
            await client.end(committed=True)
            await port.tail.until(lambda: not port.shard.offsets.has_open_transactions("g"), "the COMMIT marker")
            assert _fetch_stable(port.shard) == {0: (7, ErrorCode.none), 1: (6, ErrorCode.none)}
            # The next transaction (new epoch), aborted: the committed offsets stay.
            assert await commit({0: 100}) == {0: ErrorCode.none}
            await client.end(committed=False)
            await port.tail.until(lambda: not port.shard.offsets.has_open_transactions("g"), "the ABORT marker")
            assert _fetch_stable(port.shard) == {0: (7, ErrorCode.none), 1: (6, ErrorCode.none)}
            # A fenced producer (the epoch before this transactional id's newest): its error.
            stale = client.epoch
            await Client(state, client.txn_id).init()
            client.epoch = stale
            assert await commit({0: 999}) in ({0: ErrorCode.invalid_producer_epoch}, {0: ErrorCode.producer_fenced})
            assert not port.shard.offsets.has_pending("g", "input", 0) and port.resyncs == 0
        finally:
            await state.stop()

    asyncio.run(scenario())


def test_restart_between_append_and_marker_then_abort_by_timeout_on_kafka_4_3(kafka44, names):
    """kill -9 of kcoord between the append and the marker, in the shell: a shard loaded afresh
    from the log holds the pending offsets; Kafka then aborts the transaction by its timeout
    (transaction.timeout.ms 1 s; the fixture checks every second) and the ABORT marker drops
    them. Then a committed transaction of the same producer (new epoch after the abort)."""
    async def scenario():
        state_topic, output = f"__kcoord_{names.topic()}", names.topic()
        await StateTopic(kafka44.bootstrap, state_topic, 1).ensure_topic()
        await StateTopic(kafka44.bootstrap, output, 1).ensure_topic()
        state = FencedStateLog(kafka44.bootstrap, state_topic, 1, take_on_load=False)
        try:
            await state.start()

            async def state_leader(p, req):
                return await state._call(await state._leader(p), req)

            appender = ClientTxnAppender(state_topic, state_leader)
            client = Client(state, f"app-{names.group()}")
            await client.init(timeout_ms=1_000)
            deadline = asyncio.get_running_loop().time() + 30
            await appender.append(0, transactional_id=client.txn_id, producer_id=client.pid,
                                  producer_epoch=client.epoch, base_sequence=0, records=commits("g", {0: 42}),
                                  timestamp_ms=1, api_version=5, known_end=0, deadline=deadline)
            restarted = Tail(state)          # a fresh process: everything from the log
            await restarted.until(lambda: restarted.shard.offsets.has_pending("g", "input", 0), "the pending offset")
            assert restarted.committed("g") == {}
            await restarted.until(lambda: restarted.reader.aborted == 1, "Kafka's ABORT after the timeout")
            assert restarted.committed("g") == {} and not restarted.shard.offsets.has_open_transactions("g")
            # The producer goes on: InitProducerId again (the timeout bumped its epoch).
            await client.init()
            seq = restarted.reader.next_sequence(client.pid, client.epoch)
            assert seq == 0
            await appender.append(0, transactional_id=client.txn_id, producer_id=client.pid,
                                  producer_epoch=client.epoch, base_sequence=seq, records=commits("g", {0: 43}),
                                  timestamp_ms=1, api_version=5, known_end=restarted.offset, deadline=deadline)
            await client.end(committed=True)
            await restarted.until(lambda: restarted.committed("g") == {0: 43}, "the committed offset")
        finally:
            await state.stop()

    asyncio.run(scenario())


def test_txn_v1_add_offsets_then_produce_v9_on_kafka_4_3(kafka44, names):
    """Transactions v1 (TxnOffsetCommit v0-4: librdkafka, older Java, Tansu): AddOffsetsToTxn
    becomes AddPartitionsToTxn v3 for the state partition, the append is Produce v9, and the
    epoch stays across transactions, so the sequence continues (taken from the log)."""
    async def scenario():
        state_topic = f"__kcoord_{names.topic()}"
        await StateTopic(kafka44.bootstrap, state_topic, 1).ensure_topic()
        state = FencedStateLog(kafka44.bootstrap, state_topic, 1, take_on_load=False)
        try:
            await state.start()

            async def state_leader(p, req):
                return await state._call(await state._leader(p), req)

            appender = ClientTxnAppender(state_topic, state_leader)
            tail = Tail(state)
            client = Client(state, f"app-{names.group()}")
            await client.init()
            deadline = asyncio.get_running_loop().time() + 30
            for round_, (offset, committed) in enumerate(((5, True), (6, False), (7, True))):
                assert await client.add_offsets(state_topic, 0) is ErrorCode.none
                await tail.poll()
                while tail.offset < tail.high_watermark:
                    await tail.poll()
                seq = tail.reader.next_sequence(client.pid, client.epoch)
                assert seq == round_, "transactions v1: one epoch, the sequence goes on"
                await appender.append(0, transactional_id=client.txn_id, producer_id=client.pid,
                                      producer_epoch=client.epoch, base_sequence=seq,
                                      records=commits("g", {0: offset}), timestamp_ms=1, api_version=3,
                                      known_end=tail.offset, deadline=deadline)
                markers = tail.reader.markers
                await client.end(committed, version=4)
                await tail.until(lambda m=markers: tail.reader.markers > m, "the marker")
            assert tail.committed("g") == {0: 7}
            # Without the AddOffsetsToTxn (transactions v1), Kafka refuses the append: the
            # partition is not in the transaction (KIP-890 part 1 verification).
            with pytest.raises(TxnAppendError) as refused:
                await appender.append(0, transactional_id=client.txn_id, producer_id=client.pid,
                                      producer_epoch=client.epoch, base_sequence=3, records=commits("g", {0: 8}),
                                      timestamp_ms=1, api_version=3, known_end=tail.offset, deadline=deadline)
            assert refused.value.code is ErrorCode.invalid_txn_state, refused.value.message
        finally:
            await state.stop()

    asyncio.run(scenario())
