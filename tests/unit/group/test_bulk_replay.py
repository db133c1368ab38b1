"""The bulk loader (compaction's last-writer-wins for offset commits, with the flushes
that keep ordering where it changes the outcome) must give exactly the state of a
record-by-record replay: on generated logs with both protocols, conversions,
transactions (committed and aborted), tombstones and unknown record types."""
from __future__ import annotations

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


def _state(shard: GroupCoordinatorShard):
    groups = {}
    for gid, g in shard.groups.items():
        members = {mid: (m if not hasattr(m, "assignment") else (m.assignment, m.member_id))
                   for mid, m in g.members.items()}
        groups[gid] = (type(g).__name__, getattr(g, "group_epoch", getattr(g, "generation_id", None)),
                       getattr(g, "assignment_epoch", None), repr(sorted(members.items())),
                       repr(sorted(getattr(g, "target_assignment", {}).items())))
    return groups, shard.offsets.offsets, shard.offsets.pending_transactional, dict(shard.unknown_record_types)


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
    """Replay (key, value, offset, producer_id | 'COMMIT'/'ABORT' marker) both ways."""
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
    return _state(seq), _state(loader.shard)


def test_commit_then_group_deletion_keeps_the_group_deleted():
    """A commit creates a "simple" group; the group's tombstone after it must still win."""
    from records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
    k, v = _rec(OffsetCommitKey("g", "t", 0), OffsetCommitValue(offset=5, commit_timestamp=1))
    gk, gv = _rec(GroupMetadataKey("g"), None)
    sequential, bulk = _both([(k, v, 0, -1), (gk, gv, 1, -1)])
    assert "g" not in sequential[0] and bulk == sequential


def test_offset_tombstone_before_a_transactional_commit_of_the_same_key():
    """The tombstone comes first, so it must not drop the later transaction's offset."""
    from records import OffsetCommitKey, OffsetCommitValue
    k, v = _rec(OffsetCommitKey("g", "t", 0), OffsetCommitValue(offset=5, commit_timestamp=1))
    _, tomb = _rec(OffsetCommitKey("g", "t", 0), None)
    _, txn = _rec(OffsetCommitKey("g", "t", 0), OffsetCommitValue(offset=9, commit_timestamp=2))
    sequential, bulk = _both([(k, v, 0, -1), (k, tomb, 1, -1), (k, txn, 2, 7), ("COMMIT", 7)])
    assert sequential[1]["g"]["t"][0].offset == 9 and bulk == sequential
