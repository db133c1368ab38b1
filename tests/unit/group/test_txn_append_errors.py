"""The whole TxnOffsetCommit request (coordinator/runtime/txn_offsets_log.py,
`txn_offset_commit_request`) against scripted Produce answers: the paths a real broker only
takes on failures (a lost answer, a stale sequence, a duplicate, a leadership move, a fenced
producer, kcoord's missing ACL). The success paths run on Kafka 4.3 in
tests/integration/txn/test_txn_offsets_kafka.py."""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from coordinator.group.context import RequestContext
from coordinator.group.image import MetadataImage
from coordinator.group.kio_util import build
from coordinator.group.offsets.txn_commit import replay_pending
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.protocol.apis import response_class
from coordinator.runtime.txn_log_reader import TxnLogReader
from coordinator.runtime.txn_offsets_log import ClientTxnAppender, txn_offset_commit_request
from records.batch import ControlMarker, build_batch, build_control_batch, iter_batches

from .test_txn_offset_commit import FOO, txn_request


class Port:
    def __init__(self) -> None:
        self.shard = GroupCoordinatorShard(0, image=MetadataImage.of([FOO]))
        self.reader = TxnLogReader(self)       # the port is its own (markers-only) target
        self.log_end = 10
        self.landed: list[bytes] = []
        self.resyncs = self.barriers = 0
        self.lock = asyncio.Lock()

    def record(self, *a) -> None:
        pass

    def end_transaction(self, offset, producer_id, committed) -> None:
        self.shard.replay_end_transaction(producer_id, committed, offset)

    def check_active(self) -> None:
        pass

    def now_ms(self) -> int:
        return 5

    def exclusive_write(self):
        return self.lock

    async def caught_up(self, until=None):
        # What landed after the first read (self.landed) is read when asked up to `until`.
        if until is not None:
            for batch in self.landed:
                self.reader.feed(batch, self.log_end, until)
        return self.reader, self.log_end

    def appended(self, write, base_offset: int) -> None:
        replay_pending(self.shard, write, base_offset)

    def resync(self) -> None:
        self.resyncs += 1

    async def barrier(self) -> None:
        self.barriers += 1


class Upstream:
    """Answers Produce from a script: an ErrorCode (with `base`), or an exception to raise."""

    def __init__(self, *answers, base: int = 10) -> None:
        self.answers = list(answers)
        self.base = base
        self.requests: list = []

    async def __call__(self, partition: int, request):
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        cls = response_class(0, request.__version__)
        m = importlib.import_module(cls.__module__)
        leader = m.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1) if hasattr(m, "LeaderIdAndEpoch") else None
        part = build(m.PartitionProduceResponse, index=partition, error_code=answer, base_offset=self.base,
                     log_append_time=None, log_start_offset=0, record_errors=(), error_message=None,
                     current_leader=leader)
        topic = m.TopicProduceResponse(name="__kcoord", partition_responses=(part,))
        return build(cls, responses=(topic,), throttle_time=i32Timedelta.parse(timedelta(0)), node_endpoints=())

    def batch(self, i: int = 0):
        return next(iter_batches(self.requests[i].topic_data[0].partition_data[0].records))


def run(port: Port, upstream: Upstream, *, version: int = 5, timeout_s: float = 5.0, **kw) -> dict:
    appender = ClientTxnAppender("__kcoord", upstream, resend_backoff_s=0)
    req = txn_request("g", {"foo": {0: 1, 1: 2}}, version=version, **kw)
    resp = asyncio.run(txn_offset_commit_request(port, appender, RequestContext(api_version=version), req, timeout_s))
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def codes(answer: dict) -> set:
    return set(answer.values())


def test_success_replays_pending_at_the_real_offset_and_proves_ownership():
    port, up = Port(), Upstream(ErrorCode.none, base=12)
    assert codes(run(port, up, pid=7, epoch=2)) == {ErrorCode.none}
    batch = up.batch()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (7, 2, 0, True)
    assert up.requests[0].__version__ == 12 and up.requests[0].transactional_id == "tx"
    pending = port.shard.offsets.pending_in(7, "g")["foo"]
    assert (pending[0].record_offset, pending[1].record_offset) == (12, 13)
    assert port.barriers == 1 and port.resyncs == 0


@pytest.mark.parametrize("committed", [True, False])
def test_the_previous_transactions_marker_landing_after_the_read_ends_only_its_own_offsets(committed):
    """Seen with Kafka's TransactionalMessageCopier under CI load: the upstream answers the
    implicit add CONCURRENT_TRANSACTIONS until the previous transaction's marker is written,
    so that marker can land between kcoord's read of the log and the append. Read after the
    new offsets were replayed, a COMMIT applied them (and an aborted transaction's offsets
    became committed). The marker is now read up to the append's offset first."""
    port = Port()
    previous = txn_request("g", {"foo": {0: 40}}, pid=7, epoch=2)
    from coordinator.group.offsets.txn_commit import txn_offset_commit
    replay_pending(port.shard, txn_offset_commit(port.shard, RequestContext(api_version=5), previous, 5), 8)
    port.landed = [build_control_batch(ControlMarker.COMMIT if committed else ControlMarker.ABORT, base_offset=10,
                                       timestamp_ms=1, producer_id=7, producer_epoch=3)]
    up = Upstream(ErrorCode.none, base=11)       # the append lands after the marker
    assert codes(run(port, up, pid=7, epoch=3)) == {ErrorCode.none}
    committed_now = {p: o.offset for p, o in port.shard.offsets.group("g").get("foo", {}).items()}
    assert committed_now == ({0: 40} if committed else {})
    pending = {p: o.offset for p, o in port.shard.offsets.pending_in(7, "g")["foo"].items()}
    assert pending == {0: 1, 1: 2} and port.resyncs == 0
    # The new transaction's own marker (at 13) ends them.
    port.end_transaction(13, 7, True)
    assert {p: o.offset for p, o in port.shard.offsets.group("g")["foo"].items()} == {0: 1, 1: 2}
    assert not port.shard.offsets.has_open_transactions("g") and port.shard.offsets.pending_total() == 0


def test_a_marker_read_late_ends_only_the_offsets_written_before_it():
    """The guard in OffsetStore.end_transaction: a marker at offset 10 never ends offsets
    written at 12 and 13, which stay pending (and their group open) until their own marker."""
    port = Port()
    replay_pending(port.shard, _write(port, {"foo": {0: 40}}), 8)
    replay_pending(port.shard, _write(port, {"foo": {0: 50, 1: 60}}), 12)
    port.end_transaction(10, 7, True)
    offsets = port.shard.offsets
    # Partition 0's pending value was overwritten by the later transaction (one value per
    # producer and partition, as in Kafka): it stays pending, nothing is applied early.
    assert offsets.group("g") == {} and offsets.has_open_transactions("g")
    assert {p: o.offset for p, o in offsets.pending_in(7, "g")["foo"].items()} == {0: 50, 1: 60}
    assert offsets.pending_total() == 2
    port.end_transaction(14, 7, False)
    assert offsets.group("g") == {} and not offsets.has_open_transactions("g") and offsets.pending_total() == 0


def _write(port: Port, topics: dict):
    from coordinator.group.offsets.txn_commit import txn_offset_commit
    return txn_offset_commit(port.shard, RequestContext(api_version=5), txn_request("g", topics, pid=7, epoch=2), 5)


def test_transactions_v1_appends_with_produce_v9_and_continues_the_sequence():
    port = Port()
    port.reader.feed(build_batch([(b"\x00\x01x", b"v")] * 3, base_offset=0, timestamp_ms=1, producer_id=7,
                                 producer_epoch=2, base_sequence=4, transactional=True), 0)
    up = Upstream(ErrorCode.none)
    assert codes(run(port, up, version=3, pid=7, epoch=2)) == {ErrorCode.none}
    assert up.requests[0].__version__ == 9 and up.batch().base_sequence == 7


def test_a_refused_commit_never_reaches_the_upstream():
    port, up = Port(), Upstream()
    assert codes(run(port, up, generation=3, member="m")) == {ErrorCode.illegal_generation}
    assert up.requests == [] and port.barriers == 0


@pytest.mark.parametrize(("answer", "version", "code", "resync"), [
    (OSError("connection reset"), 5, ErrorCode.coordinator_not_available, True),
    (ErrorCode.out_of_order_sequence_number, 5, ErrorCode.coordinator_load_in_progress, True),
    (ErrorCode.duplicate_sequence_number, 5, ErrorCode.coordinator_load_in_progress, True),
    (ErrorCode.producer_fenced, 5, ErrorCode.producer_fenced, False),
    (ErrorCode.invalid_producer_epoch, 3, ErrorCode.invalid_producer_epoch, False),
    (ErrorCode.transaction_abortable, 5, ErrorCode.transaction_abortable, False),
    (ErrorCode.transaction_abortable, 3, ErrorCode.invalid_txn_state, False),
    (ErrorCode.concurrent_transactions, 5, ErrorCode.concurrent_transactions, False),
    (ErrorCode.request_timed_out, 5, ErrorCode.coordinator_not_available, False),
    (ErrorCode.message_too_large, 5, ErrorCode.unknown_server_error, False),
])
def test_append_errors_map_to_txn_offset_commit_errors_and_nothing_is_applied(answer, version, code, resync):
    port, up = Port(), Upstream(answer)
    assert codes(run(port, up, version=version)) == {code}
    assert port.shard.offsets.pending_total() == 0 and port.barriers == 0
    assert port.resyncs == (1 if resync else 0)
    assert len(up.requests) == 1, "never sent again after a failure the client is told about"


def test_an_acknowledgement_below_the_known_log_end_is_a_duplicate_not_ours():
    port, up = Port(), Upstream(ErrorCode.none, base=3)      # the log end read was 10
    assert codes(run(port, up)) == {ErrorCode.coordinator_load_in_progress}
    assert port.resyncs == 1 and port.shard.offsets.pending_total() == 0


def test_a_leadership_move_resends_the_same_batch_until_the_deadline():
    port, up = Port(), Upstream(ErrorCode.not_leader_or_follower, ErrorCode.none)
    assert codes(run(port, up)) == {ErrorCode.none}
    assert len(up.requests) == 2 and up.requests[0] is up.requests[1]
    port, up = Port(), Upstream(ErrorCode.not_leader_or_follower)
    assert codes(run(port, up, timeout_s=0)) == {ErrorCode.not_coordinator}


def test_kcoords_missing_acl_is_logged_and_not_blamed_on_the_client(caplog):
    port, up = Port(), Upstream(ErrorCode.topic_authorization_failed)
    with caplog.at_level(logging.ERROR, logger="kcoord.txn_offsets"):
        assert codes(run(port, up)) == {ErrorCode.unknown_server_error}
    assert "WRITE on the state topic" in caplog.text


def test_validation_runs_again_inside_the_write_order():
    """A group that changed while earlier writes were flushed: the second check refuses."""
    port, up = Port(), Upstream(ErrorCode.none)
    original = port.exclusive_write

    @contextlib.asynccontextmanager
    async def meanwhile():
        async with original():
            port.shard.image = MetadataImage.of([])      # the topic is gone meanwhile
            yield

    port.exclusive_write = meanwhile  # type: ignore[method-assign]
    assert codes(run(port, up)) == {ErrorCode.unknown_topic_or_partition}
    assert up.requests == []
