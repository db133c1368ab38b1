"""Exactly-once through a running `kcoord serve` (issue 16), on Kafka 4.4 and Tansu: a real
librdkafka consume-transform-produce loop commits its input offsets inside its transaction
(`send_offsets_to_transaction`: AddOffsetsToTxn, answered by kcoord as AddPartitionsToTxn v3 of
the group's state partition, then TxnOffsetCommit appended as the client's producer).

What this proves:
- committed offsets appear once the transaction commits, never after an abort;
- a read_committed downstream consumer sees each input exactly once across an abort and a retry;
- OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT while the transaction is open
  (KIP-447), and the committed offset once it committed;
- kill -9 of kcoord between the offsets' append and the marker: the restarted kcoord rebuilds
  the pending offsets from the log, and the marker written later applies (commit) or drops
  (abort) them.
Java's own loop (sendOffsetsToTransaction with classic and consumer-protocol groups, timeout,
zombie, kill -9) is in test_eos_java_loop.py, Kafka Streams exactly_once_v2 in
test_eos_streams.py, librdkafka's timeout and zombie in test_eos_rdkafka_timeout_zombie.py.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v7 import request as offset_fetch_v7

from coordinator.upstream.client import UpstreamClient as KafkaLink
from support.admin import create_topic
from support.kcoord import KcoordProcess
from support.produce import produce_records
from support.wait import wait_until

pytestmark = [pytest.mark.integration]
INPUTS = 20
TANSU_READ_COMMITTED = ("Tansu 0.6 answers Fetch(read_committed) with no AbortedTransactions and LSO = HWM, so a "
                        "read_committed consumer also reads aborted records (the gateway suite's "
                        "test_read_committed_consumer_skips_aborted_records shows it without transactions of "
                        "offsets)")


@pytest.fixture
def kcoord(module_kcoord: KcoordProcess) -> KcoordProcess:
    """One kcoord per upstream for the module (conftest.py)."""
    return module_kcoord


def _consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "isolation.level": "read_committed", **extra})


def _producer(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 60_000})
    producer.init_transactions(30)
    return producer


def _read_inputs(consumer: Consumer, topic: str, n: int) -> list:
    got: list = []

    def read() -> bool:
        for m in consumer.consume(n, 0.5):
            if m.error() is None:
                got.append(m)
        return len(got) >= n

    wait_until(read, 60, message=f"{n} input records of {topic} are consumed")
    return got


def _committed(bootstrap: str, group: str, topic: str) -> int:
    """The group's committed offset of partition 0 (-1001: none), read_uncommitted (no
    require_stable)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_uncommitted"})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=20)[0].offset
    finally:
        c.close()


def _fetch_stable(bootstrap: str, group: str, topic: str) -> tuple[ErrorCode, int]:
    """OffsetFetch v7 with require_stable through kcoord: (partition error, offset)."""
    async def go():
        host, _, port = bootstrap.rpartition(":")
        link = await KafkaLink.connect([(host, int(port))], client_id="eos-test")
        try:
            from kio.schema.types import GroupId, TopicName
            from kio.static.primitive import i32
            req = offset_fetch_v7.OffsetFetchRequest(group_id=GroupId(group), topics=(
                offset_fetch_v7.OffsetFetchRequestTopic(name=TopicName(topic), partition_indexes=(i32(0),)),),
                require_stable=True)
            for _ in range(100):
                r = await link.request(req, 10)
                if r.error_code in (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator):
                    await asyncio.sleep(0.1)
                    continue
                assert r.error_code is ErrorCode.none, r
                p = r.topics[0].partitions[0]
                return p.error_code, int(p.committed_offset)
            raise AssertionError("OffsetFetch kept answering COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR")
        finally:
            link.close()
    return asyncio.run(go())


def _downstream(bootstrap: str, topic: str, group: str, expected: int) -> list[bytes]:
    c = _consumer(bootstrap, group)
    seen: list[bytes] = []
    try:
        c.subscribe([topic])

        def read() -> bool:
            for m in c.consume(100, 0.5):
                if m.error() is None:
                    seen.append(m.value())
            return len(seen) >= expected

        wait_until(read, 60, message=f"{expected} committed outputs of {topic} are read")
        # Nothing more arrives (an aborted output would show up here).
        for m in c.consume(100, 2.0):
            if m.error() is None:
                seen.append(m.value())
    finally:
        c.close()
    return seen


def _send_offsets(producer: Producer, consumer: Consumer, topic: str, offset: int) -> None:
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, offset)], consumer.consumer_group_metadata(), 30)


def _abort_then_commit(kcoord, upstream, names) -> tuple[list, str]:
    """A consume-transform-produce round aborted, then retried and committed; the offsets'
    checks along the way. Returns (the committed inputs, the output topic)."""
    src, dst, group = names.topic(), names.topic(), names.group()
    create_topic(upstream.bootstrap, src, 1)
    create_topic(upstream.bootstrap, dst, 1)
    produce_records(upstream.bootstrap, src, INPUTS)
    consumer = _consumer(kcoord.bootstrap, group)
    producer = _producer(kcoord.bootstrap, f"eos-{src}")
    try:
        consumer.subscribe([src])
        # Round 1: transform everything, send the offsets, abort.
        inputs = _read_inputs(consumer, src, INPUTS)
        producer.begin_transaction()
        for m in inputs:
            producer.produce(dst, m.value(), m.key())
        _send_offsets(producer, consumer, src, inputs[-1].offset() + 1)
        # Open transaction: a stable fetch must not answer the pending offset.
        code, _ = _fetch_stable(kcoord.bootstrap, group, src)
        assert code is ErrorCode.unstable_offset_commit
        assert _committed(kcoord.bootstrap, group, src) < 0, "an open transaction's offset is not committed"
        producer.abort_transaction(30)
        wait_until(lambda: _fetch_stable(kcoord.bootstrap, group, src)[0] is ErrorCode.none, 30,
                   message="the ABORT marker ends the pending offsets")
        assert _committed(kcoord.bootstrap, group, src) < 0, "an aborted offset never applies"

        # Round 2: rewind to the committed position (none: the start), retry, commit.
        consumer.seek(TopicPartition(src, 0, 0))
        inputs = _read_inputs(consumer, src, INPUTS)
        assert [m.offset() for m in inputs] == list(range(INPUTS))
        producer.begin_transaction()
        for m in inputs:
            producer.produce(dst, m.value(), m.key())
        _send_offsets(producer, consumer, src, INPUTS)
        producer.commit_transaction(30)
        wait_until(lambda: _fetch_stable(kcoord.bootstrap, group, src) == (ErrorCode.none, INPUTS), 30,
                   message="the COMMIT marker applies the offset")
        assert _committed(kcoord.bootstrap, group, src) == INPUTS
    finally:
        consumer.close()
    return inputs, dst


def test_librdkafka_send_offsets_abort_then_commit_exactly_once_downstream(kcoord, upstream, names, request):
    """The offsets' checks of an aborted and a committed round, then a read_committed
    downstream consumer sees each input once. On Tansu the downstream check is the expected
    failure (strict: a Tansu that passes it fails this test, to drop the expectation); the
    offsets' checks must pass there."""
    inputs, dst = _abort_then_commit(kcoord, upstream, names)
    outputs = _downstream(kcoord.bootstrap, dst, names.group(), INPUTS)
    exactly_once = sorted(outputs) == sorted(m.value() for m in inputs)
    if request.node.callspec.params.get("upstream") == "tansu":
        assert not exactly_once, f"Tansu reads committed records only now: drop the xfail ({TANSU_READ_COMMITTED})"
        pytest.xfail(TANSU_READ_COMMITTED)
    assert exactly_once, "each input exactly once downstream"


@dataclass
class _Pending:
    """A transaction whose offsets were sent (and a plain commit of offset 5 before it)."""

    src: str
    dst: str
    group: str
    consumer: Consumer
    producer: Producer


def _pending(kcoord, upstream, names) -> _Pending:
    src, dst, group = names.topic(), names.topic(), names.group()
    create_topic(upstream.bootstrap, src, 1)
    create_topic(upstream.bootstrap, dst, 1)
    produce_records(upstream.bootstrap, src, INPUTS)
    consumer = _consumer(kcoord.bootstrap, group)
    try:
        producer = _producer(kcoord.bootstrap, f"eos-kill-{src}")
        consumer.subscribe([src])
        inputs = _read_inputs(consumer, src, INPUTS)
        # A plain commit first, so that an abort leaves something to see.
        consumer.commit(offsets=[TopicPartition(src, 0, 5)], asynchronous=False)
        producer.begin_transaction()
        for m in inputs:
            producer.produce(dst, m.value(), m.key())
        _send_offsets(producer, consumer, src, INPUTS)
        assert _fetch_stable(kcoord.bootstrap, group, src)[0] is ErrorCode.unstable_offset_commit
    except BaseException:
        consumer.close()
        raise
    return _Pending(src, dst, group, consumer, producer)


def test_kill_dash_nine_between_offsets_and_marker(kcoord, upstream, names):
    """Two transactions with their offsets appended, kcoord killed (-9) before either marker:
    the restarted kcoord rebuilds both as pending from the log; one is then committed, the
    other aborted, and each marker applies (commit) or drops (abort) its offsets. A second
    kill and restart reads the same outcomes from the log. (Both ride one kill: a restart
    costs ~10 s on a loaded machine.)"""
    cases: dict[bool, _Pending] = {}
    try:
        for commit in (True, False):
            cases[commit] = _pending(kcoord, upstream, names)
        # kill -9 after the offsets' append, before the markers.
        assert kcoord.kill() == -9
        kcoord.restart()
        for commit, case in cases.items():
            # The restarted kcoord loaded the client's offsets as pending, from the log.
            assert _fetch_stable(kcoord.bootstrap, case.group, case.src)[0] is ErrorCode.unstable_offset_commit, commit
        for commit, case in cases.items():
            if commit:
                case.producer.commit_transaction(60)
            else:
                case.producer.abort_transaction(60)
        for commit, case in cases.items():
            expected = INPUTS if commit else 5
            marker = "COMMIT" if commit else "ABORT"
            wait_until(lambda c=case, e=expected: _fetch_stable(kcoord.bootstrap, c.group, c.src)
                       == (ErrorCode.none, e), 30, message=f"the {marker} marker written after the restart is applied")
            assert _committed(kcoord.bootstrap, case.group, case.src) == expected
    finally:
        for case in cases.values():
            case.consumer.close()
    # A second restart reads the same outcomes from the log.
    assert kcoord.kill() == -9
    kcoord.restart()
    for commit, case in cases.items():
        assert _fetch_stable(kcoord.bootstrap, case.group, case.src) == (ErrorCode.none, INPUTS if commit else 5)
    outputs = _downstream(kcoord.bootstrap, cases[True].dst, names.group(), INPUTS)
    assert len(outputs) == INPUTS


# --------------------------------------------------------------------------- Java 4.4
COPIED = 200


def _java_copier(kcoord, upstream, names) -> tuple[str, str, str]:
    """Kafka's own consume-transform-produce program (kafka-tools TransactionalMessageCopier,
    Java 4.4 clients: transactions v1 through kcoord, so AddOffsetsToTxn + TxnOffsetCommit):
    transactions of 10 records, some aborted at random (it then rewinds to the committed
    offsets, fetched with require_stable since its consumer reads read_committed)."""
    from support.kafka_tools import run_tool

    src, dst, group = names.topic(), names.topic(), names.group()
    create_topic(upstream.bootstrap, src, 1)
    create_topic(upstream.bootstrap, dst, 1)
    produce_records(upstream.bootstrap, src, COPIED)
    result = run_tool("org.apache.kafka.tools.TransactionalMessageCopier", [
        "--broker-list", kcoord.bootstrap, "--input-topic", src, "--input-partition", "0",
        "--output-topic", dst, "--consumer-group", group, "--transactional-id", f"copier-{src}",
        "--transaction-size", "10", "--enable-random-aborts", "--group-mode", "--use-group-metadata",
        "--max-messages", "-1"], timeout=240)
    assert result.rc == 0, result.describe()
    assert _committed(kcoord.bootstrap, group, src) == COPIED, "the copier's last transaction committed every offset"
    assert _fetch_stable(kcoord.bootstrap, group, src) == (ErrorCode.none, COPIED)
    return src, dst, group


@pytest.mark.java
@pytest.mark.timeout(300)   # the copier itself may run 240 s (run_tool) with random aborts
def test_java_transactional_message_copier_commits_offsets_exactly_once_downstream(kcoord, upstream, names,
                                                                                  java_classes, request):
    """The copier's committed offsets (checked in _java_copier on every upstream), then each
    input once downstream. On Tansu a run whose random aborts returned records downstream is
    the expected failure (Tansu's read_committed bug); a run without an abort must pass there
    too."""
    _, dst, _ = _java_copier(kcoord, upstream, names)
    outputs = _downstream(kcoord.bootstrap, dst, names.group(), COPIED)
    on_tansu = request.node.callspec.params.get("upstream") == "tansu"
    # More than COPIED records read: aborted ones among them. The reader stops one batch
    # after COPIED records, so with many aborted records it may stop before reading every
    # committed copy (a run here read 300 records, not every input among them).
    if on_tansu and len(outputs) > COPIED:
        pytest.xfail(f"{TANSU_READ_COMMITTED}: the copier's aborted records were read downstream")
    assert len(outputs) == COPIED and len(set(outputs)) == COPIED, "each input exactly once downstream"


# ------------------------------------------------------------- the fenced state log
def test_librdkafka_send_offsets_through_a_fenced_kcoord_instance(kafka44, names):
    """`kcoord serve --instance-id` writes through the fenced state log (the default, fencing by
    writing: docs/design/fencing.md): the load takes the shard under a bumped producer epoch and
    its fence write, kcoord's own writes are idempotent batches under that epoch, and a client's
    transactional append still lands and is read back. Kafka only: Tansu cannot carry the
    membership group."""
    from support.kcoord import CLUSTER, KcoordProcess

    proc = KcoordProcess(kafka44.bootstrap, f"__kc_{names.topic()}", state_partitions=4, config=CLUSTER,
                         extra_args=("--instance-id", "kc-0"))
    proc.start(timeout=60)
    try:
        _abort_then_commit(proc, kafka44, names)
    finally:
        proc.stop()
