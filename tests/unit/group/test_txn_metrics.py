"""The transactional-offset metrics (coordinator/runtime/txn_metrics.py) from shard state."""
from __future__ import annotations

from coordinator.runtime.txn_metrics import TxnOffsetCollector

from .test_txn_offset_commit import FOO, TxnShardContext


def _samples(collector) -> dict:
    return {(m.name, tuple(s.labels.items())): s.value for m in collector.collect() for s in m.samples}


def test_pending_offsets_producers_and_the_oldest_age():
    c = TxnShardContext(FOO)
    collector = TxnOffsetCollector(lambda: [c.shard], clock_ms=lambda: 61_000)
    assert _samples(collector)[("kcoord_pending_txn_oldest_age_seconds", ())] == 0
    c.now_ms = 1_000
    c.txn_commit("g", {"foo": {0: 1, 1: 1}}, pid=1)
    c.now_ms = 31_000
    c.txn_commit("g", {"foo": {2: 1}}, pid=2)
    s = _samples(collector)
    assert s[("kcoord_pending_txn_offsets", (("partition", "0"),))] == 3
    assert s[("kcoord_open_txn_producers", (("partition", "0"),))] == 2
    assert s[("kcoord_pending_txn_oldest_age_seconds", ())] == 60
    c.marker(1, committed=True)
    s = _samples(collector)
    assert s[("kcoord_pending_txn_offsets", (("partition", "0"),))] == 1
    assert s[("kcoord_pending_txn_oldest_age_seconds", ())] == 30
