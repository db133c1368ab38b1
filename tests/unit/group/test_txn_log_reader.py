"""The state-partition reader for client transactions (coordinator/runtime/txn_log_reader.py):
real record batches (built with records.batch, as Kafka stores them) in, replay out."""
from __future__ import annotations

from coordinator.group import record_helpers as rh
from coordinator.group.bulk_replay import BulkReplay
from coordinator.group.classic.group import ClassicGroup
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.runtime.txn_log_reader import BulkTarget, ShardTarget, TxnLogReader
from records import decode_record, encode_key, encode_value
from records.batch import ControlMarker, build_batch, build_control_batch

T = 1_700_000_000_000


def enc(rec):
    return encode_key(rec.key), encode_value(rec.value, rec.value_version)


def commit(group: str, partition: int, offset: int):
    return enc(rh.offset_commit_record(group, "foo", partition, offset=offset, leader_epoch=-1, metadata="",
                                       commit_timestamp=T))


class Log:
    """A partition's bytes, batch by batch, with Kafka's offsets."""

    def __init__(self) -> None:
        self.data = b""
        self.next = 0

    def plain(self, *records) -> None:
        self._add(build_batch(list(records), base_offset=self.next, timestamp_ms=T), len(records))

    def txn(self, pid: int, epoch: int, seq: int, *records) -> None:
        self._add(build_batch(list(records), base_offset=self.next, timestamp_ms=T, producer_id=pid,
                              producer_epoch=epoch, base_sequence=seq, transactional=True), len(records))

    def marker(self, pid: int, epoch: int, committed: bool) -> None:
        self._add(build_control_batch(ControlMarker.COMMIT if committed else ControlMarker.ABORT,
                                      base_offset=self.next, timestamp_ms=T, producer_id=pid, producer_epoch=epoch), 1)

    def _add(self, batch: bytes, n: int) -> None:
        self.data += batch
        self.next += n


def decode(key, value, offset):
    return decode_record(key, value, topic="__test", partition=0, offset=offset)


def load(log: Log, chunk: int | None = None) -> tuple[GroupCoordinatorShard, TxnLogReader]:
    shard = GroupCoordinatorShard(0)
    reader = TxnLogReader(ShardTarget(shard, decode))
    if chunk is None:
        assert reader.feed(log.data, 0) == log.next
    else:   # a fetch answer may stop mid-batch: the reader resumes at its returned offset
        offset, pos = 0, 0
        while offset < log.next:
            pos += chunk
            offset = reader.feed(log.data[:pos], offset)
    return shard, reader


def offsets(shard, group="g") -> dict:
    return {(t, p): o.offset for t, parts in shard.offsets.group(group).items() for p, o in parts.items()}


def sample_log() -> Log:
    log = Log()
    log.plain(commit("g", 0, 1))                        # 0: a plain commit
    log.txn(5, 0, 0, commit("g", 0, 50), commit("g", 1, 51))   # 1-2: client producer 5
    log.txn(9, 3, 7, enc(rh.group_metadata_tombstone("old")), commit("g", 2, 9))  # 3-4: kcoord's own
    log.txn(6, 0, 0, commit("g", 3, 60))                # 5: client producer 6
    log.marker(9, 3, committed=True)                    # 6
    log.marker(5, 1, committed=True)                    # 7 (transactions v2: marker epoch + 1)
    log.marker(6, 0, committed=False)                   # 8
    return log


def test_client_transactions_pend_until_their_marker_and_own_ones_apply_at_commit():
    log = Log()
    log.plain(enc(rh.group_metadata_tombstone("unused")))
    log.txn(5, 0, 0, commit("g", 0, 50))
    shard, reader = load(log)
    # The client's offsets are pending (not committed) before the marker.
    assert shard.offsets.has_pending("g", "foo", 0) and offsets(shard) == {}
    log.marker(5, 1, committed=True)
    shard, reader = load(log)
    assert offsets(shard) == {("foo", 0): 50} and reader.markers == 1


def test_the_sample_log_rebuilds_kafkas_state_whole_and_in_pieces():
    log = sample_log()
    for chunk in (None, 37, 101):
        shard, reader = load(log, chunk)
        assert offsets(shard) == {("foo", 0): 50, ("foo", 1): 51, ("foo", 2): 9}, chunk
        assert not shard.offsets.has_open_transactions("g") and reader.aborted == 1
        assert not reader.held


def test_an_aborted_own_transaction_applies_nothing_not_even_its_tombstone():
    log = Log()
    log.plain(commit("g", 0, 1))
    log.plain(enc(rh.offset_commit_record("g", "foo", 1, offset=2, leader_epoch=-1, metadata="",
                                          commit_timestamp=T)))
    log.txn(9, 0, 0, enc(rh.offset_tombstone("g", "foo", 0)), commit("g", 1, 99))
    log.marker(9, 0, committed=False)
    shard, _ = load(log)
    assert offsets(shard) == {("foo", 0): 1, ("foo", 1): 2}
    assert isinstance(shard.groups["g"], ClassicGroup)


def test_the_bulk_loader_reaches_the_same_state():
    log = sample_log()
    seq, _ = load(log)
    loader = BulkReplay(GroupCoordinatorShard(0))
    TxnLogReader(BulkTarget(loader)).feed(log.data, 0)
    loader.flush()
    assert loader.shard.offsets.offsets == seq.offsets.offsets
    assert loader.shard.offsets.pending_transactional == seq.offsets.pending_transactional
    assert set(loader.shard.groups) == set(seq.groups)


def test_producer_sequences_continue_from_the_log():
    log = Log()
    log.txn(5, 0, 0, commit("g", 0, 1), commit("g", 1, 1))
    log.marker(5, 0, committed=True)
    log.txn(5, 0, 2, commit("g", 0, 2))
    log.txn(7, 4, 10, commit("g", 0, 3))
    _, reader = load(log)
    # Transactions v1: the same epoch continues its sequence across transactions.
    assert reader.next_sequence(5, 0) == 3
    # Transactions v2 bumps the epoch every transaction: a new epoch starts at 0.
    assert reader.next_sequence(5, 1) == 0
    assert reader.next_sequence(7, 4) == 11 and reader.next_sequence(8, 0) == 0
    assert reader.producers[7].last_offset == log.next - 1
