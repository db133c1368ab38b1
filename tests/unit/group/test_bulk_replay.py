"""The bulk loader (compaction's last-writer-wins for offset commits, with the flushes
that keep ordering where it changes the outcome) must give exactly the state of a
record-by-record replay: on generated logs with both protocols, conversions,
transactions (committed and aborted), tombstones and unknown record types."""
from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from coordinator.group.bulk_replay import BulkReplay
from coordinator.group.shard import GroupCoordinatorShard
from ops.generator import GeneratorSpec, generate
from ops.logsource import Problems
from ops.segment import iter_buffer
from records import decode_record
from records.batch import ControlMarker


def _batches(spec: GeneratorSpec):
    for p, batches in generate(spec).items():
        buf = b"".join(batches)
        yield from iter_buffer(buf, len(buf), f"gen-{p}", p, Problems())


def _normal(value):
    """A comparable form that ignores insertion order (the bulk loader applies records of
    different keys in another order) but nothing else: every field, index and counter."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, tuple((f.name, _normal(getattr(value, f.name)))
                                            for f in dataclasses.fields(value)))
    if isinstance(value, dict):  # Counter too: a zero count is a leftover, not state
        return ("dict", tuple(sorted(((repr(k), _normal(v)) for k, v in value.items()
                                      if not (isinstance(value, Counter) and v == 0)))))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(v) for v in value)))
    if isinstance(value, (list, tuple)):
        return tuple(_normal(v) for v in value)
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return (type(value).__name__, _normal(vars(value)))
    return repr(value)


def _state(shard: GroupCoordinatorShard):
    groups = {gid: _normal(g) for gid, g in shard.groups.items()}
    return (groups, _normal(shard.offsets.offsets), _normal(shard.offsets.pending_transactional),
            dict(shard.unknown_record_types))


@pytest.mark.parametrize("seed", [3, 7, 11, 19])
def test_bulk_replay_equals_record_by_record_replay(seed):
    spec = GeneratorSpec(records=8000, groups=20, seed=seed, partitions=2, transactional_fraction=0.3,
                         cycle_fraction=0.3)
    sequential: dict[int, GroupCoordinatorShard] = {}
    bulk: dict[int, BulkReplay] = {}
    for lb in _batches(spec):
        b = lb.batch
        seq = sequential.setdefault(lb.partition, GroupCoordinatorShard(lb.partition))
        loader = bulk.setdefault(lb.partition, BulkReplay(GroupCoordinatorShard(lb.partition)))
        pid = b.producer_id if b.is_transactional else -1
        if b.is_control_batch:
            committed = b.control_type == ControlMarker.COMMIT
            seq.replay_end_transaction(b.producer_id, committed)
            loader.end_transaction(b.producer_id, committed)
            continue
        for r in b.records:
            seq.replay(decode_record(r.key, r.value), r.offset, pid)
        loader.add_batch(b.records, pid)
    assert sequential
    for p, loader in bulk.items():
        loader.flush()
        assert _state(loader.shard) == _state(sequential[p])
        assert loader.records == sum(1 for lb in _batches(spec) if lb.partition == p
                                     and not lb.batch.is_control_batch for _ in lb.batch.records)


def _rec(key, value, version=None):
    from records import encode_key, encode_value
    return encode_key(key), encode_value(value, version)


def _both(log: list[tuple]):
    """Replay (key, value, offset, producer_id | 'COMMIT'/'ABORT' marker) both ways; the
    record-by-record shard, and both states."""
    seq, loader = GroupCoordinatorShard(0), BulkReplay(GroupCoordinatorShard(0))
    for entry in log:
        if entry[0] in ("COMMIT", "ABORT"):
            seq.replay_end_transaction(entry[1], entry[0] == "COMMIT")
            loader.end_transaction(entry[1], entry[0] == "COMMIT")
            continue
        key, value, offset, pid = entry
        seq.replay(decode_record(key, value), offset, pid)
        loader.add(key, value, offset, pid)
    loader.flush()
    return seq, _state(seq), _state(loader.shard)


def test_commit_then_group_deletion_keeps_the_group_deleted():
    """A commit creates a "simple" group; the group's tombstone after it must still win."""
    from records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
    k, v = _rec(OffsetCommitKey("g", "t", 0), OffsetCommitValue(offset=5, commit_timestamp=1))
    gk, gv = _rec(GroupMetadataKey("g"), None)
    seq, sequential, bulk = _both([(k, v, 0, -1), (gk, gv, 1, -1)])
    assert "g" not in seq.groups and bulk == sequential


def test_offset_tombstone_before_a_transactional_commit_of_the_same_key():
    """The tombstone comes first, so it must not drop the later transaction's offset."""
    from records import OffsetCommitKey, OffsetCommitValue
    k, v = _rec(OffsetCommitKey("g", "t", 0), OffsetCommitValue(offset=5, commit_timestamp=1))
    _, tomb = _rec(OffsetCommitKey("g", "t", 0), None)
    _, txn = _rec(OffsetCommitKey("g", "t", 0), OffsetCommitValue(offset=9, commit_timestamp=2))
    seq, sequential, bulk = _both([(k, v, 0, -1), (k, tomb, 1, -1), (k, txn, 2, 7), ("COMMIT", 7)])
    assert seq.offsets.offsets["g"]["t"][0].offset == 9 and bulk == sequential


def test_superseded_consumer_group_records_then_deletion_and_recreation():
    """Consumer-group records are buffered last-per-key; a group tombstone applies them
    (and the group's commits) first, so the deletion wins, and the records after it build
    the new group from scratch."""
    from records import (
        ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue,
        ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue, ConsumerGroupMetadataKey,
        ConsumerGroupMetadataValue, OffsetCommitKey, OffsetCommitValue,
    )
    epoch = lambda e: _rec(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(epoch=e))  # noqa: E731
    member = lambda m, topics: _rec(ConsumerGroupMemberMetadataKey("g", m),  # noqa: E731
                                    ConsumerGroupMemberMetadataValue(client_id=m, subscribed_topic_names=topics))
    current = lambda m, e: _rec(ConsumerGroupCurrentMemberAssignmentKey("g", m),  # noqa: E731
                                ConsumerGroupCurrentMemberAssignmentValue(member_epoch=e, previous_member_epoch=e - 1))
    tomb = lambda rec: (rec[0], None)  # noqa: E731
    log = [epoch(1), member("m1", ("a",)), current("m1", 1), epoch(2), member("m1", ("a", "b")), current("m1", 2),
           _rec(OffsetCommitKey("g", "a", 0), OffsetCommitValue(offset=3, commit_timestamp=1)),
           tomb(current("m1", 0)), tomb(member("m1", ())), tomb(epoch(0)),
           epoch(1), member("m2", ("c",)), current("m2", 1)]
    seq, sequential, bulk = _both([(k, v, i, -1) for i, (k, v) in enumerate(log)])
    assert set(seq.groups["g"].members) == {"m2"} and seq.groups["g"].group_epoch == 1
    assert bulk == sequential
