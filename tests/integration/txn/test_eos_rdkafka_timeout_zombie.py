"""librdkafka's transactional API through a running `kcoord serve` (issue 16, point 5): abort by
transaction timeout, and a zombie producer, on Kafka 4.4 and Tansu. (The commit / abort loop
and kill -9 are in test_eos_through_kcoord.py.)

What this proves:
- a producer that sent its offsets (send_offsets_to_transaction) and then stalls is aborted by
  the upstream's transaction coordinator after transaction.timeout.ms; kcoord drops the
  pending offsets at the ABORT marker, so OffsetFetch shows the old offsets and
  require_stable stops answering UNSTABLE_OFFSET_COMMIT (Tansu 0.6 never aborts a timed-out
  transaction: strict xfail);
- a second producer with the same transactional.id fences the first (KIP-98): the first's
  send_offsets_to_transaction or commit fails with a fenced error, and its offsets never appear.
"""
from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from eos_clients import stable

from support.admin import create_topic
from support.produce import produce_records
from support.wait import wait_until

pytestmark = [pytest.mark.integration]
INPUTS = 20
TANSU_NO_TIMEOUT = pytest.mark.xfail(
    strict=True, reason="Tansu 0.6 stores transaction.timeout.ms (InitProducerId) but never aborts a timed-out "
                        "transaction (a librdkafka producer with a 3 s timeout still committed after 45 s "
                        "idle), so the offsets stay pending; strict: passes once Tansu acts on it")
# librdkafka's codes for a fenced producer: the broker's PRODUCER_FENCED / INVALID_PRODUCER_EPOCH,
# or its own _FENCED once it raised the fatal error.
FENCED = {KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH, KafkaError._FENCED}


def _consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
    c.subscribe([topic])
    return c


def _consume(c: Consumer, n: int) -> list:
    got: list = []

    def read() -> bool:
        got.extend(m for m in c.consume(n, 0.5) if m.error() is None)
        return len(got) >= n

    wait_until(read, 60, message=f"{n} input records consumed")
    return got


def _producer(bootstrap: str, txn_id: str, timeout_ms: int = 60_000) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": timeout_ms,
                  # librdkafka requires socket.timeout.ms <= transaction.timeout.ms.
                  "socket.timeout.ms": min(timeout_ms, 60_000)})
    p.init_transactions(30)
    return p


def _transaction(p: Producer, c: Consumer, records: list, dst: str, topic: str) -> None:
    """Begin, produce the transformed records, send the offsets (not committed)."""
    p.begin_transaction()
    for m in records:
        p.produce(dst, m.value().upper(), m.key())
    p.send_offsets_to_transaction([TopicPartition(topic, 0, records[-1].offset() + 1)],
                                  c.consumer_group_metadata(), 30)


@pytest.mark.parametrize("upstream", ["kafka44", pytest.param("tansu", marks=TANSU_NO_TIMEOUT)], indirect=True)
def test_librdkafka_abort_by_transaction_timeout(kcoord, upstream, names):
    """transaction.timeout.ms=3000; the Kafka fixture checks for timed-out transactions every
    second (transaction.abort.timed.out.transaction.cleanup.interval.ms=1000)."""
    src, dst, group = names.topic(), names.topic(), names.group()
    create_topic(upstream.bootstrap, src, 1)
    create_topic(upstream.bootstrap, dst, 1)
    produce_records(upstream.bootstrap, src, INPUTS, partition=0)
    c = _consumer(kcoord.bootstrap, group, src)
    p = _producer(kcoord.bootstrap, f"rd-stall-{src}", timeout_ms=3000)
    try:
        records = _consume(c, INPUTS)
        _transaction(p, c, records[:5], dst, src)
        p.commit_transaction(30)
        assert wait_until(lambda: stable(kcoord.bootstrap, group, src, 1), 30,
                          message="the first transaction's COMMIT applies") == {0: 5}
        _transaction(p, c, records[5:], dst, src)
        assert stable(kcoord.bootstrap, group, src, 1) is None, "pending while the transaction is open"
        # Stall: the upstream's transaction coordinator aborts after 3 s; the ABORT marker drops
        # the pending offsets.
        after = wait_until(lambda: stable(kcoord.bootstrap, group, src, 1), 20,
                           message="the upstream aborts the timed-out transaction")
        assert after == {0: 5}, f"a timed-out transaction's offsets never apply: {after}"
        with pytest.raises(KafkaException):
            p.commit_transaction(30)
        assert stable(kcoord.bootstrap, group, src, 1) == {0: 5}
    finally:
        c.close()


@pytest.mark.parametrize("upstream", ["tansu", "kafka44"], indirect=True)
def test_librdkafka_zombie_producer_is_fenced(kcoord, upstream, names):
    src, dst = names.topic(), names.topic()
    zombie_group, group = names.group(), names.group()
    create_topic(upstream.bootstrap, src, 1)
    create_topic(upstream.bootstrap, dst, 1)
    produce_records(upstream.bootstrap, src, INPUTS, partition=0)
    txn_id = f"rd-zombie-{src}"
    zc, c = _consumer(kcoord.bootstrap, zombie_group, src), _consumer(kcoord.bootstrap, group, src)
    try:
        zombie = _producer(kcoord.bootstrap, txn_id)
        _consume(zc, INPUTS)     # a member of its group: real KIP-447 metadata
        zombie.begin_transaction()
        zombie.produce(dst, b"zombie")
        successor = _producer(kcoord.bootstrap, txn_id)      # bumps the epoch: fences the zombie
        with pytest.raises(KafkaException) as fenced:
            zombie.send_offsets_to_transaction([TopicPartition(src, 0, INPUTS)], zc.consumer_group_metadata(), 30)
            zombie.commit_transaction(30)
        assert fenced.value.args[0].code() in FENCED, f"the zombie fails as fenced: {fenced.value.args[0]}"
        # The successor's transaction commits; the zombie's group never gets an offset.
        _transaction(successor, c, _consume(c, INPUTS)[:7], dst, src)
        successor.commit_transaction(30)
        assert wait_until(lambda: stable(kcoord.bootstrap, group, src, 1), 30,
                          message="the successor's COMMIT applies") == {0: 7}
        assert wait_until(lambda: stable(kcoord.bootstrap, zombie_group, src, 1), 30,
                          message="nothing pending in the zombie's group") == {0: -1}, "no zombie offsets"
    finally:
        zc.close()
        c.close()
