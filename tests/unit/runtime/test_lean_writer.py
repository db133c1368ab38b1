"""The lean state-topic writer (coordinator/runtime/lean_writer.py) against a simulated
broker that keeps each partition's log and deduplicates by (producer id, sequence) as Kafka
does: coalescing, sequences, retries that keep order and bytes, the in-flight bound, and a
new producer id once a sequence is in doubt."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as produce_v9

from coordinator.protocol.codec import decode_body
from coordinator.runtime.fenced_links import StateLogError
from coordinator.runtime.lean_writer import MAX_REQUESTS_IN_FLIGHT, LeanWriter, _Append, _ProduceRequests
from records.batch import iter_batches

BROKER = ("127.0.0.1", 9092)


class Broker:
    """The `UpstreamLinks` the writer uses, over an in-memory log per partition."""

    def __init__(self, partitions: int = 8) -> None:
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[int, int] = {}
        self.partitions = partitions
        self.request_timeout_s = 1.0
        self.logs: dict[int, list] = {p: [] for p in range(partitions)}
        self.next_producer_id = 1000
        self.requests: list[list[tuple[int, object]]] = []     # per Produce: (partition, batch)
        self.script: list = []          # per Produce: "lost" (appended, link lost), "lost-before", or {p: code}
        self.gate: asyncio.Event | None = None
        self.inflight = 0
        self.max_inflight_seen = 0
        self.metadata_refreshes = 0
        self.down = False

    async def refresh_metadata(self) -> None:
        self.metadata_refreshes += 1
        if self.down:
            raise StateLogError("no upstream broker answered")
        self.brokers = {1: BROKER}
        self.leaders = {p: 1 for p in range(self.partitions)}

    def forget_leader(self, partition: int) -> None:
        self.leaders.pop(partition, None)

    def close(self) -> None: ...

    async def bootstrap_call(self, request) -> SimpleNamespace:
        assert request.transactional_id is None       # idempotent, not transactional
        self.next_producer_id += 1
        return SimpleNamespace(error_code=ErrorCode.none, producer_id=self.next_producer_id, producer_epoch=0)

    def _append(self, partition: int, data: bytes) -> tuple[ErrorCode, int]:
        (batch,) = list(iter_batches(data))
        log = self.logs[partition]
        for offset, b in log:
            if (b.producer_id, b.base_sequence) == (batch.producer_id, batch.base_sequence):
                return ErrorCode.none, offset        # a duplicate: its original offset
        last = [b for _, b in log if b.producer_id == batch.producer_id]
        expected = last[-1].base_sequence + len(last[-1].records) if last else 0
        if batch.base_sequence != expected:
            return ErrorCode.out_of_order_sequence_number, -1
        offset = sum(len(b.records) for _, b in log)
        log.append((offset, batch))
        return ErrorCode.none, offset

    def send(self, address, request) -> asyncio.Future:
        return asyncio.ensure_future(self.call(address, request))

    def failed(self, address, request, error: BaseException) -> StateLogError:
        assert isinstance(error, StateLogError)     # call's own: the writer only retries
        return error

    async def call(self, address, request) -> SimpleNamespace:
        request = decode_body(produce_v9.ProduceRequest, request.body, 0)     # the bytes the broker reads
        assert address == BROKER and int(request.acks) == -1 and request.transactional_id is None
        parts = [(int(p.index), p.records) for t in request.topic_data for p in t.partition_data]
        self.requests.append(parts)
        step = self.script.pop(0) if self.script else {}
        self.inflight += 1
        self.max_inflight_seen = max(self.max_inflight_seen, self.inflight)
        try:
            if self.gate is not None:
                await self.gate.wait()
            if step == "lost-before":
                raise StateLogError("connection lost")
            answers = []
            for p, data in parts:
                code = step.get(p) if isinstance(step, dict) else None
                if code is None:
                    code, offset = self._append(p, data)
                else:
                    offset = -1
                answers.append(SimpleNamespace(index=p, error_code=code, base_offset=offset))
            if step == "lost":
                raise StateLogError("connection lost after the append")
            return SimpleNamespace(responses=[SimpleNamespace(partition_responses=answers)])
        finally:
            self.inflight -= 1


def records(n: int, tag: str = "k") -> list[tuple[bytes, bytes]]:
    return [(f"{tag}{i}".encode(), b"v") for i in range(n)]


async def started(broker: Broker, **kw) -> LeanWriter:
    writer = LeanWriter(broker, "__state", **kw)   # type: ignore[arg-type]
    await writer.start()
    return writer


def test_every_shards_batch_of_a_loop_turn_goes_in_one_request_with_its_own_sequence():
    async def run():
        broker = Broker()
        writer = await started(broker)
        first = await asyncio.gather(*(writer.append(p, records(p + 1), 0) for p in range(4)))
        second = await asyncio.gather(*(writer.append(p, records(2), 0) for p in range(4)))
        return broker, writer, first, second

    broker, writer, first, second = asyncio.run(run())
    assert len(broker.requests) == 2 and [len(r) for r in broker.requests] == [4, 4]
    assert first == [0, 0, 0, 0] and second == [1, 2, 3, 4]
    for p in range(4):
        batches = [b for _, b in broker.logs[p]]
        assert [b.base_sequence for b in batches] == [0, p + 1]
        assert {b.producer_id for b in batches} == {writer.producer_id}
        assert not any(b.is_transactional for b in batches)


def test_a_lost_link_resends_the_same_bytes_and_a_landed_batch_is_not_written_twice():
    async def run():
        broker = Broker()
        broker.script = ["lost", "lost-before"]
        writer = await started(broker)
        got = await writer.append(3, records(5), 0)
        after = await writer.append(3, records(1), 0)
        return broker, got, after

    broker, got, after = asyncio.run(run())
    assert got == 0 and after == 5
    assert broker.requests[0] == broker.requests[1] == broker.requests[2]      # the same bytes, three times
    assert [(o, len(b.records)) for o, b in broker.logs[3]] == [(0, 5), (5, 1)]


def test_a_moved_leader_is_looked_up_again_and_the_batch_resent():
    async def run():
        broker = Broker()
        broker.script = [{2: ErrorCode.not_leader_or_follower}]
        writer = await started(broker)
        refreshes = broker.metadata_refreshes
        got = await writer.append(2, records(3), 0)
        return broker, got, broker.metadata_refreshes - refreshes

    broker, got, refreshes = asyncio.run(run())
    assert got == 0 and refreshes >= 1 and len(broker.logs[2]) == 1


def test_a_sequence_in_doubt_fails_the_append_and_the_next_send_takes_a_new_producer_id():
    async def run():
        broker = Broker()
        writer = await started(broker)
        await writer.append(0, records(2), 0)
        first_id = writer.producer_id
        broker.script = [{0: ErrorCode.out_of_order_sequence_number}]
        with pytest.raises(StateLogError, match="out_of_order_sequence_number"):
            await writer.append(0, records(1), 0)
        got = await writer.append(0, records(1), 0)
        return broker, writer, first_id, got

    broker, writer, first_id, got = asyncio.run(run())
    assert writer.producer_id != first_id and got == 2
    assert [(b.producer_id, b.base_sequence) for _, b in broker.logs[0]] == [(first_id, 0), (writer.producer_id, 0)]


def test_a_refused_batch_fails_the_append_and_the_partition_writes_on_under_a_new_producer_id():
    async def run():
        broker = Broker()
        writer = await started(broker)
        first_id = writer.producer_id
        broker.script = [{1: ErrorCode.message_too_large}]
        with pytest.raises(StateLogError, match="message_too_large"):
            await writer.append(1, records(1), 0)
        return broker, writer, first_id, await writer.append(1, records(1), 0)

    broker, writer, first_id, got = asyncio.run(run())
    assert got == 0 and writer.producer_id != first_id
    assert [(b.producer_id, b.base_sequence) for _, b in broker.logs[1]] == [(writer.producer_id, 0)]


def test_a_failed_append_is_reported_to_on_failure_once_with_its_partition_and_a_written_one_is_not():
    """The state topic's on_write_error hangs here: the failure is reported when it happens,
    whether or not anybody awaits the append."""
    reported: list[tuple[int, str]] = []

    async def run():
        broker = Broker()
        writer = await started(broker)
        writer.on_failure = lambda partition, error: reported.append((partition, str(error)))
        broker.script = [{1: ErrorCode.message_too_large}]
        written = writer.append(0, records(1), 0)
        refused = writer.append(1, records(1), 0)
        assert await written == 0
        with pytest.raises(StateLogError, match="message_too_large"):
            await refused
        writer.close()

    asyncio.run(run())
    assert len(reported) == 1 and reported[0][0] == 1 and "message_too_large" in reported[0][1]


def test_at_most_max_requests_are_in_flight_per_broker_and_the_rest_wait_their_turn():
    async def run():
        broker = Broker(partitions=8)
        writer = await started(broker)
        broker.gate = asyncio.Event()
        appends = []
        for p in range(8):                  # one per loop turn: one request each while there is room
            appends.append(asyncio.ensure_future(writer.append(p, records(1), 0)))
            for _ in range(3):
                await asyncio.sleep(0)
        in_flight = broker.inflight
        broker.gate.set()
        offsets = await asyncio.gather(*appends)
        return broker, in_flight, offsets

    broker, in_flight, offsets = asyncio.run(run())
    assert in_flight == MAX_REQUESTS_IN_FLIGHT == broker.max_inflight_seen
    # MAX_REQUESTS_IN_FLIGHT requests of one batch each; the other batches waited and went
    # together in one request once the gate opened.
    waited = 8 - MAX_REQUESTS_IN_FLIGHT
    assert offsets == [0] * 8 and len(broker.requests) == MAX_REQUESTS_IN_FLIGHT + 1 \
        and len(broker.requests[-1]) == waited


def test_an_append_never_acknowledged_fails_at_its_deadline_and_the_sequence_is_in_doubt():
    async def run():
        broker = Broker()
        writer = await started(broker, delivery_timeout_s=0.2)
        first_id = writer.producer_id
        broker.script = ["lost-before"] * 1000
        with pytest.raises(StateLogError, match="not acknowledged"):
            await writer.append(0, records(1), 0)
        broker.script = []
        got = await writer.append(0, records(1), 0)
        return writer, first_id, got

    writer, first_id, got = asyncio.run(run())
    assert got == 0 and writer.producer_id != first_id


def test_a_batch_sent_before_the_upstream_went_away_leaves_its_sequence_in_doubt():
    """The link is lost, the metadata cannot be read again: the append fails, and the next
    one does not reuse a sequence the lost batch took (a new producer id)."""
    async def run():
        broker = Broker()
        writer = await started(broker)
        await writer.append(1, records(1), 0)
        first_id = writer.producer_id
        broker.script, broker.down = ["lost-before"], True
        with pytest.raises(StateLogError, match="no upstream broker"):
            await writer.append(1, records(1), 0)
        broker.down = False
        return broker, writer, first_id, await writer.append(1, records(1), 0)

    broker, writer, first_id, got = asyncio.run(run())
    assert got == 1 and writer.producer_id != first_id
    assert [(b.producer_id, b.base_sequence) for _, b in broker.logs[1]] == [(first_id, 0), (writer.producer_id, 0)]


def test_closing_the_writer_answers_every_append_in_flight_or_waiting():
    async def run():
        broker = Broker()
        writer = await started(broker)
        broker.gate = asyncio.Event()              # the request never comes back
        sent = asyncio.ensure_future(writer.append(0, records(1), 0))
        for _ in range(3):
            await asyncio.sleep(0)
        waiting = asyncio.ensure_future(writer.append(0, records(1), 0))   # behind the one in flight
        await asyncio.sleep(0)
        writer.close()
        return await asyncio.gather(sent, waiting, return_exceptions=True)

    results = asyncio.run(asyncio.wait_for(run(), 10))
    assert all(isinstance(r, StateLogError) and "closed" in str(r) for r in results), results


def test_append_then_hands_each_outcome_over_once_and_a_then_may_append_again():
    """The shard writer's path (partition_writer.py's `append_then`): the base offset or the
    failure handed over once, the failure after on_failure heard it, a `then` that raises
    does not keep the other appends of its answer from theirs, and an append made from a
    `then` (the shard's next batch) is sent."""
    outcomes: list[tuple[int, int, str | None]] = []
    reported: list[int] = []

    async def run():
        broker = Broker()
        writer = await started(broker)
        writer.on_failure = lambda partition, error: reported.append(len(outcomes))
        done = asyncio.Event()

        def then(partition: int):
            def outcome(base: int, error: BaseException | None) -> None:
                outcomes.append((partition, base, None if error is None else str(error)))
                if partition == 0 and 0 <= base < 3:
                    writer.append_then(0, records(1), 0, then(0))      # the shard's next batch
                if partition == 2:
                    raise RuntimeError("a broken callback")
                if len(outcomes) == 5:
                    done.set()
            return outcome

        broker.script = [{1: ErrorCode.message_too_large}]
        for p in (2, 0, 1):
            writer.append_then(p, records(2), 0, then(p))
        assert not outcomes, "never handed over from inside the call"
        await asyncio.wait_for(done.wait(), 5)
        writer.close()

    asyncio.run(run())
    assert sorted(outcomes[:3]) == [(0, 0, None), (1, -1, outcomes[2][2]), (2, 0, None)]
    assert "message_too_large" in str(outcomes[2][2]) and reported == [2], "on_failure heard it first"
    assert outcomes[3:] == [(0, 2, None), (0, 3, None)]


# --- the ProduceRequest v9 the writer sends: fast_codec's encoder writes kio's bytes ---------

import io  # noqa: E402
from datetime import timedelta  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from kio.serial import entity_writer  # noqa: E402

from coordinator.protocol.codec import encode_body  # noqa: E402
from coordinator.protocol.fast_codec import FAST_ENCODERS  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(txn=st.one_of(st.none(), st.text(max_size=200)), acks=st.sampled_from([-1, 0, 1]),
       timeout=st.integers(0, 2**31 - 1), topics=st.lists(st.tuples(st.text(max_size=200), st.lists(
           st.tuples(st.integers(-2**31, 2**31 - 1), st.one_of(st.none(), st.binary(max_size=400))), max_size=30)),
           max_size=5))
def test_the_produce_request_encoder_writes_kios_bytes(txn, acks, timeout, topics):
    msg = produce_v9.ProduceRequest(transactional_id=txn, acks=acks, timeout=timedelta(milliseconds=timeout),
                                    topic_data=tuple(produce_v9.TopicProduceData(name=name, partition_data=tuple(
                                        produce_v9.PartitionProduceData(index=i, records=r) for i, r in parts))
                                        for name, parts in topics))
    buf = io.BytesIO()
    entity_writer(type(msg))(buf, msg)
    assert FAST_ENCODERS[type(msg)] is not None and encode_body(msg) == buf.getvalue()


@settings(max_examples=300, deadline=None)
@given(topic=st.text(max_size=300), timeout_ms=st.integers(0, 2**31 - 1),
       batches=st.lists(st.tuples(st.integers(0, 2**31 - 1), st.binary(max_size=400)), min_size=1, max_size=30))
def test_the_writers_produce_request_is_kios_bytes(topic, timeout_ms, batches):
    """The lean writer writes its ProduceRequest's body itself: the bytes kio writes for the
    same request (idempotent, acks=all, one topic), whatever the name, timeout and batches."""
    appends = [_Append(p, [(b"k", b"v")], 0, None, 0.0) for p, _ in batches]
    for a, (_, data) in zip(appends, batches):
        a.batch = data
    timeout_s = timeout_ms / 1000
    request = _ProduceRequests().build(topic, timeout_s, appends, lambda a: a.batch)
    timeout = timedelta(milliseconds=int(timeout_s * 1000))      # the writer's milliseconds
    msg = produce_v9.ProduceRequest(transactional_id=None, acks=-1, timeout=timeout,
                                    topic_data=(produce_v9.TopicProduceData(name=topic, partition_data=tuple(
                                        produce_v9.PartitionProduceData(index=p, records=r) for p, r in batches)),))
    buf = io.BytesIO()
    entity_writer(type(msg))(buf, msg)
    assert (request.__api_key__, request.__version__) == (0, 9) and request.body == buf.getvalue()


def test_a_broker_that_never_answers_fails_the_append_within_its_deadline():
    """Real links (UpstreamLinks over UpstreamClient) to a broker that reads every request and
    answers none: each request fails at the link's request timeout and is resent, and the
    append fails once its delivery deadline passed; the bound holds with no per-request timer."""
    from coordinator.runtime.fenced_links import UpstreamLinks
    from coordinator.upstream.client import open_plain_link

    async def run():
        received = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while data := await reader.read(65536):
                received.append(len(data))
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        address = ("127.0.0.1", server.sockets[0].getsockname()[1])
        links = UpstreamLinks([address], "__state", open_plain_link, request_timeout_s=0.05,
                              fetch_max_bytes=1024)
        broker = Broker()

        async def metadata() -> None:
            links.brokers, links.leaders = {1: address}, {0: 1}
        links.refresh_metadata = metadata           # type: ignore[method-assign]
        links.bootstrap_call = broker.bootstrap_call  # type: ignore[method-assign]
        writer = LeanWriter(links, "__state", delivery_timeout_s=0.3)
        await writer.start()
        try:
            async with asyncio.timeout(10):         # far above the deadline: no hang
                with pytest.raises(StateLogError, match="not acknowledged within"):
                    await writer.append(0, records(1), 0)
        finally:
            writer.close()
            links.close()
            server.close()
            await server.wait_closed()
        return writer, received

    writer, received = asyncio.run(run())
    assert writer.requests_sent >= 1 and received                # the Produce reached the broker
    assert writer.producer_id == -1                               # its sequence is in doubt


class _ManualAnswers(Broker):
    """Every Produce's answer is a future the test completes."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[asyncio.Future] = []

    def send(self, address, request) -> asyncio.Future:
        self.requests.append(request)
        self.answers.append(asyncio.get_running_loop().create_future())
        return self.answers[-1]


async def _turns(n: int = 10) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_close_in_the_turn_an_answer_failed_queues_and_sends_nothing_more(monkeypatch):
    """close() runs in the turn a Produce's answer failed, before the answer's callback: the
    callback must neither queue the appends again nor send (and so reopen a link) after it."""
    monkeypatch.setattr("coordinator.runtime.lean_writer.RETRY_BACKOFF_S", 0.0)   # a retry would come at once

    async def run():
        broker = _ManualAnswers()
        writer = await started(broker)
        append = writer.append(0, records(1), 0)
        await _turns()
        assert len(broker.answers) == 1
        broker.answers[0].set_exception(StateLogError("connection lost"))
        writer.close()                      # the same turn: the answer's callback has not run
        await _turns()
        assert writer._waiting == [] and len(broker.answers) == 1
        with pytest.raises(StateLogError, match="writer closed"):
            await append
        late = writer.append(1, records(1), 0)      # after close(): refused, never sent
        await _turns()
        assert len(broker.answers) == 1
        with pytest.raises(StateLogError, match="writer closed"):
            await late

    asyncio.run(run())


async def _expired_before_its_resend(broker: Broker, writer: LeanWriter, partition: int) -> asyncio.Future:
    """An append whose request failed (outcome unknown), queued for its resend and expired
    meanwhile (with RETRY_BACKOFF_S set long, the resend waits for the next send)."""
    broker.script = ["lost-before"]
    append = writer.append(partition, records(1), 0)
    await _turns()
    assert len(broker.requests) == 1 and len(writer._waiting) == 1     # queued for its resend
    writer._waiting[0].deadline = 0.0                                  # and expired meanwhile
    return append


def test_an_append_expired_before_its_resend_leaves_no_batch_without_a_producer_id(monkeypatch):
    """An append sent, failed (outcome unknown) and expired while waiting for its resend puts
    its producer's sequences in doubt. An append sent in the same turn must not be built under
    producer id -1 (not idempotent): it waits for the next producer id."""
    monkeypatch.setattr("coordinator.runtime.lean_writer.RETRY_BACKOFF_S", 3600.0)  # no resend on its own

    async def run():
        broker = Broker()
        writer = await started(broker)
        first = await _expired_before_its_resend(broker, writer, 0)
        second = writer.append(1, records(1), 0)
        async with asyncio.timeout(10):
            results = await asyncio.gather(first, second, return_exceptions=True)
        assert isinstance(results[0], StateLogError) and results[1] == 0
        producers = [next(iter(iter_batches(data))).producer_id for req in broker.requests for _, data in req]
        assert -1 not in producers and producers[-1] != producers[0]

    asyncio.run(run())


def test_a_request_that_cannot_be_built_fails_its_appends_and_frees_its_broker():
    async def run():
        broker = Broker()
        writer = await started(broker)
        broker.request_timeout_s = 1e10         # milliseconds past int32: the request's timeout refuses it
        with pytest.raises(StateLogError, match="could not be built"):
            async with asyncio.timeout(10):
                await writer.append(0, records(1), 0)
        broker.request_timeout_s = 1.0
        async with asyncio.timeout(10):
            assert await writer.append(1, records(1), 0) == 0

    asyncio.run(run())


class _TwoBrokers(Broker):
    """Partition 2 led by a second broker (answered by the same simulated logs)."""

    other = ("127.0.0.2", 9092)

    async def refresh_metadata(self) -> None:
        await super().refresh_metadata()
        self.brokers = {1: BROKER, 2: self.other}
        self.leaders[2] = 2

    async def call(self, address, request):
        return await super().call(BROKER if address == self.other else address, request)


def test_a_request_that_cannot_be_built_leaves_no_other_brokers_batch_without_a_producer_id():
    """One send, two brokers: the first broker's request fails to build after one of its
    batches was built (which puts the producer's sequences in doubt); the second broker's
    appends wait for the next producer id instead of going out under producer id -1."""
    async def run():
        broker = _TwoBrokers()
        writer = await started(broker)
        await broker.refresh_metadata()
        ok = writer.append(0, records(1), 0)
        bad = writer.append(1, records(1), 2**70)    # build_batch refuses the timestamp, after p0's batch
        other = writer.append(2, records(1), 0)      # the second broker's request, in the same send
        async with asyncio.timeout(10):
            results = await asyncio.gather(ok, bad, other, return_exceptions=True)
        assert isinstance(results[1], StateLogError) and results[2] == 0
        producers = [next(iter(iter_batches(d))).producer_id for req in broker.requests for _, d in req]
        assert -1 not in producers

    asyncio.run(run())


def test_a_producer_id_reset_in_a_send_keeps_a_partitions_appends_in_order(monkeypatch):
    monkeypatch.setattr("coordinator.runtime.lean_writer.RETRY_BACKOFF_S", 3600.0)  # no resend on its own

    async def run():
        broker = Broker()
        writer = await started(broker)
        expired = await _expired_before_its_resend(broker, writer, 1)
        first = writer.append(0, records(1, "a"), 0)
        second = writer.append(0, records(1, "b"), 0)
        async with asyncio.timeout(10):
            results = await asyncio.gather(expired, first, second, return_exceptions=True)
        assert isinstance(results[0], StateLogError) and results[1:] == [0, 1]

    asyncio.run(run())


def test_a_shards_flush_waits_for_the_send_that_can_carry_its_batch():
    """`flush_before_send`: while its broker has a request in flight, a shard's flush waits,
    so what arrives meanwhile joins its batch; the answer's send runs it first, and the batch
    goes in that request. With the broker free, the flush runs in the next send's turn."""
    async def run():
        broker = Broker(partitions=4)
        writer = await started(broker)
        broker.gate = asyncio.Event()
        in_flight = asyncio.ensure_future(writer.append(0, records(1), 0))
        await _turns()
        assert len(broker.requests) == 1 and broker.inflight == 1
        batch: list[tuple[bytes, bytes]] = []
        landed: list[int] = []
        flushed: list[int] = []

        def flush() -> None:
            flushed.append(len(batch))
            writer.append_then(1, list(batch), 0, lambda base, error: landed.append(base))
        batch.extend(records(1, "a"))
        writer.flush_before_send(1, flush)
        for tag in "bc":
            await _turns()
            batch.extend(records(1, tag))
        assert not flushed and len(broker.requests) == 1, "its broker is busy: the batch stays open"
        broker.gate.set()
        assert await in_flight == 0
        await _turns()
        assert flushed == [3] and landed == [0] and len(broker.requests) == 2
        assert [p for p, _ in broker.requests[1]] == [1]
        (sent,) = iter_batches(broker.requests[1][0][1])
        assert len(sent.records) == 3
        writer.flush_before_send(2, lambda: writer.append_then(2, records(2), 0, lambda b, e: landed.append(b)))
        await _turns()
        assert landed == [0, 0] and [p for p, _ in broker.requests[2]] == [2], "a free broker: the next turn's send"
    asyncio.run(run())


def test_a_flush_offered_after_close_still_runs_and_its_append_is_refused():
    """A shard's flush offered to a closed writer runs at once (no send will come to run it);
    left waiting, its shard would stay flush-scheduled and never write or reload again."""
    async def run() -> None:
        writer = await started(Broker(partitions=4))
        writer.close()
        outcomes: list[tuple[int, object]] = []
        writer.flush_before_send(1, lambda: writer.append_then(1, records(1), 0,
                                                               lambda base, error: outcomes.append((base, error))))
        await _turns()
        assert len(outcomes) == 1 and outcomes[0][0] == -1 and isinstance(outcomes[0][1], StateLogError)
    asyncio.run(run())


def test_close_needs_no_running_loop_when_no_flush_waits():
    writer = asyncio.run(started(Broker(partitions=4)))
    writer.close()
    assert writer._closed
