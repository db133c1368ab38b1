"""`kcoord offsets load`: routing by Kafka's partitioner and transactions resolved the way
replay would resolve them."""
from __future__ import annotations

from coordinator.group.hashing import partition_for
from ops.describe import replay_model
from ops.dumpfile import DumpRecord
from ops.generator import GeneratorSpec
from ops.load import LoadPlan, plan
from ops.logsource import LogBatch
from ops.materialise import OffsetsReplay
from records.batch import RecordBatch

from .logs import LogBuilder, commit, generated_batches, offset_tombstone


def as_batches(items) -> list[LogBatch]:
    """The planned records, one plain batch per record, in write order per target partition."""
    out, offsets = [], {}
    for p, key, value, ts in items:
        off = offsets.get(p, 0)
        offsets[p] = off + 1
        out.append(LogBatch("loaded", p, RecordBatch(-1, 0, 2, off, off, -1, -1, -1, -1, False, False,
                                                     0, [DumpRecord(off, ts, key, value)])))
    return out


def test_records_go_to_their_groups_partition():
    log = LogBuilder().write(commit("alpha", "t", 0, 1), commit("beta", "t", 0, 2),
                             commit("gamma", "t", 0, 3))
    result = LoadPlan(7)
    targets = [(p, key) for p, key, _, _ in plan(log.log_batches(), 7, result)]
    for p, key in targets:
        group = key[4:4 + int.from_bytes(key[2:4], "big")].decode()
        assert p == partition_for(group, 7)
    assert result.records == 3


def test_transactions_are_resolved_like_replay():
    log = (LogBuilder()
           .write(commit("g", "t", 0, 10))
           .write(commit("g", "t", 0, 20), commit("g", "t", 1, 21), producer_id=5)
           .write(commit("g", "t", 2, 30), producer_id=6)
           .write(commit("g", "t", 1, 22))          # later than the pending 21: 21 must not win
           .marker(6, committed=False)
           .marker(5, committed=True)
           .write(commit("g", "t", 3, 40), producer_id=7)
           .write(offset_tombstone("g", "t", 3))    # drops the pending entry
           .marker(7, committed=True)
           .write(commit("g", "t", 4, 50), producer_id=8))   # never ends
    result = LoadPlan(3)
    loaded = as_batches(plan(log.log_batches(), 3, result))
    want = replay_model(OffsetsReplay().feed_all(log.log_batches()))
    got = replay_model(OffsetsReplay().feed_all(loaded))
    offsets = lambda m: [o for g in m["groups"] for o in g["offsets"]]  # noqa: E731
    assert offsets(got) == offsets(want)
    assert {(o["partition"], o["offset"]) for o in offsets(got)} == {(0, 20), (1, 22)}
    assert result.committed_txn_records == 1 and result.open_txn_records == 1
    assert result.dropped_txn_records == 3


def test_a_generated_log_loads_to_the_same_state_on_another_partition_count():
    spec = GeneratorSpec(records=8000, groups=24, seed=4, partitions=3)
    batches = generated_batches(spec)
    result = LoadPlan(5)
    loaded = as_batches(plan(batches, 5, result))
    want = replay_model(OffsetsReplay().feed_all(batches))["groups"]
    got = replay_model(OffsetsReplay().feed_all(loaded))["groups"]
    for g in want:
        g.pop("partition")
        g["pending_transactional_offsets"] = []
    for g in got:
        assert g.pop("partition") == partition_for(g["group"], 5)
    assert got == want
    assert result.committed_txn_records > 0 and result.dropped_txn_records > 0
