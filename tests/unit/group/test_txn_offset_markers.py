"""Pending transactional offsets and their end markers (issue 16 §3): COMMIT applies, ABORT
drops, Kafka's ordering rule against plain commits, OffsetFetch(require_stable), OffsetDelete
and retention with pending offsets, and reloads (record by record and bulk) rebuilding the
same state from the log."""
from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.group.kio_util import schema
from records import decode_record

from .test_offsets_and_admin import commit
from .test_txn_offset_commit import BAR, FOO, TxnShardContext, codes


def fetch(c: TxnShardContext, group: str, topics: dict | None, *, stable: bool, version: int = 7) -> dict:
    mod = schema("offset_fetch", version, "request")
    ts = None if topics is None else tuple(
        mod.OffsetFetchRequestTopic(name=n, partition_indexes=tuple(ps)) for n, ps in topics.items())
    resp = c.call("offset_fetch", mod.OffsetFetchRequest(group_id=group, topics=ts, require_stable=stable), version)
    assert resp.error_code == ErrorCode.none
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code) for t in resp.topics for p in t.partitions}


def offsets(shard, group: str = "g") -> dict:
    return {(t, p): o.offset for t, parts in shard.offsets.group(group).items() for p, o in parts.items()}


def assert_reloads_agree(c: TxnShardContext) -> None:
    """A restart rebuilds committed and pending offsets from the log, both loaders alike."""
    for fresh in (c.reload(), c.bulk_reload()):
        assert fresh.offsets.offsets == c.shard.offsets.offsets
        assert fresh.offsets.pending_transactional == c.shard.offsets.pending_transactional
        assert fresh.offsets.open_transactions == c.shard.offsets.open_transactions
        assert fresh.offsets.pending_counts == c.shard.offsets.pending_counts
        total = sum(fresh.offsets.pending_counts.values())
        assert fresh.offsets.pending_total() == c.shard.offsets.pending_total() == total


def test_commit_marker_applies_and_abort_marker_drops():
    c = TxnShardContext(FOO)
    c.txn_commit("g", {"foo": {0: 10}}, pid=1)
    c.txn_commit("g", {"foo": {1: 20}}, pid=2)
    assert offsets(c.shard) == {}
    assert_reloads_agree(c)
    c.marker(1, committed=True)
    c.marker(2, committed=False)
    assert offsets(c.shard) == {("foo", 0): 10}
    assert not c.shard.offsets.has_open_transactions("g") and c.shard.offsets.pending_total() == 0
    assert_reloads_agree(c)
    assert offsets(c.reload()) == {("foo", 0): 10}


def test_a_marker_without_pending_offsets_here_is_ignored():
    c = TxnShardContext(FOO)
    commit(c, "g", "", -1, {"foo": {0: 5}})
    c.marker(99, committed=True)
    c.marker(98, committed=False)
    assert offsets(c.shard) == {("foo", 0): 5}


def test_require_stable_answers_unstable_offset_commit_while_pending():
    c = TxnShardContext(FOO)
    commit(c, "g", "", -1, {"foo": {0: 5, 1: 6}})
    c.txn_commit("g", {"foo": {0: 50}}, pid=1)
    want = {("foo", 0): 5, ("foo", 1): 6}
    # Without require_stable the committed offset is answered, pending or not (KIP-447).
    assert {k: v[0] for k, v in fetch(c, "g", {"foo": [0, 1]}, stable=False).items()} == want
    stable = fetch(c, "g", {"foo": [0, 1]}, stable=True)
    assert stable[("foo", 0)] == (-1, ErrorCode.unstable_offset_commit)
    assert stable[("foo", 1)] == (6, ErrorCode.none)
    # Fetch-all (no topics) lists committed offsets, the pending partition answered unstable.
    assert fetch(c, "g", None, stable=True)[("foo", 0)] == (-1, ErrorCode.unstable_offset_commit)
    c.marker(1, committed=True)
    assert fetch(c, "g", {"foo": [0]}, stable=True) == {("foo", 0): (50, ErrorCode.none)}


def test_require_stable_on_multi_group_fetch_v8():
    c = TxnShardContext(FOO)
    c.txn_commit("g", {"foo": {2: 1}}, pid=1)
    mod = schema("offset_fetch", 8, "request")
    req = mod.OffsetFetchRequest(groups=(mod.OffsetFetchRequestGroup(group_id="g", topics=(
        mod.OffsetFetchRequestTopics(name="foo", partition_indexes=(2,)),)),), require_stable=True)
    from coordinator.group.offsets.ops import fetch_offsets
    from coordinator.group.offsets.requests import fetch_answer
    topics = fetch_offsets(c.shard, fetch_answer(8), "g", req.groups[0].topics, True)
    assert topics[0].partitions[0].error_code == ErrorCode.unstable_offset_commit


def test_commit_applies_only_if_newer_in_the_log_than_the_committed_offset():
    """Kafka: "We always keep the most recent committed offset when we have a mix of
    transactional and regular offset commits" (`replayEndTransactionMarker` compares the
    records' offsets in the log)."""
    c = TxnShardContext(FOO)
    commit(c, "g", "", -1, {"foo": {0: 1, 1: 1}})          # plain, before the transaction
    c.txn_commit("g", {"foo": {0: 100, 1: 100}}, pid=1)  # transactional
    commit(c, "g", "", -1, {"foo": {1: 7}})                # plain, after it
    c.marker(1, committed=True)
    assert offsets(c.shard) == {("foo", 0): 100, ("foo", 1): 7}
    assert_reloads_agree(c)
    # Two producers: the later record wins whatever the order of the markers.
    c.txn_commit("g", {"foo": {2: 20}}, pid=2)
    c.txn_commit("g", {"foo": {2: 30}}, pid=3)
    c.marker(3, committed=True)
    c.marker(2, committed=True)
    assert offsets(c.shard)[("foo", 2)] == 30
    assert_reloads_agree(c)


def test_one_producer_in_several_groups_commits_all_of_them():
    c = TxnShardContext(FOO, BAR)
    c.txn_commit("g", {"foo": {0: 1}}, pid=1)
    c.txn_commit("h", {"bar": {1: 2}}, pid=1)
    c.txn_commit("g", {"foo": {0: 3}}, pid=1)    # the same partition again: the last one counts
    assert c.shard.offsets.pending_counts == {1: 2}
    c.marker(1, committed=True)
    assert offsets(c.shard, "g") == {("foo", 0): 3} and offsets(c.shard, "h") == {("bar", 1): 2}
    assert_reloads_agree(c)


def test_offset_delete_tombstones_pending_offsets_and_the_commit_then_applies_nothing():
    c = TxnShardContext(FOO)
    commit(c, "g", "", -1, {"foo": {0: 5}})
    c.txn_commit("g", {"foo": {1: 9, 2: 9}}, pid=1)
    mod = schema("offset_delete", 0, "request")
    req = mod.OffsetDeleteRequest(group_id="g", topics=(mod.OffsetDeleteRequestTopic(
        name="foo", partitions=tuple(mod.OffsetDeleteRequestPartition(partition_index=p) for p in (0, 1, 3))),))
    before = len(c.log)
    resp = c.call("offset_delete", req, 0)
    assert resp.error_code == ErrorCode.none
    # Committed foo-0 and pending-only foo-1 get a tombstone; foo-3 has nothing to delete.
    written = [decode_record(k, v) for _, k, v in c.log[before:]]
    assert [(r.key.topic, r.key.partition, r.value) for r in written] == [("foo", 0, None), ("foo", 1, None)]
    assert not c.shard.offsets.has_pending("g", "foo", 1) and c.shard.offsets.has_pending("g", "foo", 2)
    # The producer's transaction is still open in the group until its marker (Kafka keeps it).
    assert c.shard.offsets.has_open_transactions("g")
    c.marker(1, committed=True)
    assert offsets(c.shard) == {("foo", 2): 9}
    assert_reloads_agree(c)


def test_pending_offsets_block_retention_of_the_committed_offset():
    c = TxnShardContext(FOO)
    c.loaded()
    commit(c, "g", "", -1, {"foo": {0: 5, 1: 5}})
    c.txn_commit("g", {"foo": {0: 6}}, pid=1)
    c.advance(c.config.offsets_retention_ms + c.config.offsets_retention_check_interval_ms)
    # foo-1 expired; foo-0 is kept while a transactional offset is pending for it (Kafka).
    assert offsets(c.shard) == {("foo", 0): 5}
    c.marker(1, committed=False)
    c.advance(c.config.offsets_retention_check_interval_ms)
    assert offsets(c.shard) == {}


def test_a_reload_between_append_and_marker_then_the_marker_decides():
    """kill -9 between the append and the marker, in the core: the reloaded shard holds the
    pending offsets and applies the marker that arrives afterwards."""
    c = TxnShardContext(FOO)
    c.txn_commit("g", {"foo": {0: 10}}, pid=1)
    c.txn_commit("g", {"foo": {1: 11}}, pid=2)
    fresh = c.reload()
    assert fresh.offsets.has_pending("g", "foo", 0) and fresh.offsets.get("g", "foo", 0) is None
    fresh.replay_end_transaction(1, True)
    fresh.replay_end_transaction(2, False)
    assert offsets(fresh) == {("foo", 0): 10}


def test_group_deletion_and_deleted_topics_cover_pending_offsets():
    c = TxnShardContext(FOO, BAR)
    commit(c, "g", "", -1, {"foo": {0: 1}})
    c.txn_commit("g", {"foo": {0: 2, 1: 2}, "bar": {0: 2}}, pid=1)
    # Kafka's deleteAllOffsets: committed ones, then pending ones without a committed offset.
    assert c.shard.offsets.deletable_partitions("g") == [("foo", 0), ("bar", 0), ("foo", 1)]
    # Kafka's onPartitionsDeleted: both stores.
    assert c.shard.offsets.partitions_of_topics({"foo"}) == [("g", "foo", 0), ("g", "foo", 1)]


def test_metrics_helpers_count_pending_offsets_and_find_the_oldest():
    c = TxnShardContext(FOO)
    assert c.shard.offsets.pending_total() == 0 and c.shard.offsets.oldest_pending_commit_ms() is None
    c.now_ms = 1_000
    c.txn_commit("g", {"foo": {0: 1}}, pid=1)
    c.now_ms = 2_000
    c.txn_commit("g", {"foo": {1: 1, 2: 1}}, pid=2)
    assert c.shard.offsets.pending_total() == 3 and c.shard.offsets.oldest_pending_commit_ms() == 1_000
    c.marker(1, committed=True)
    assert c.shard.offsets.oldest_pending_commit_ms() == 2_000


def test_a_fenced_zombie_commit_never_reaches_the_log_but_its_partner_commits():
    """Zombie: a member fenced from the group (stale generation) gets ILLEGAL_GENERATION and
    writes nothing; the live member's offsets commit with its producer's marker."""
    from .test_classic_groups import cfg, form_group
    c = TxnShardContext(FOO, config=cfg())
    m1, m2 = form_group(c, "g", 2)
    assert codes(c.txn_commit("g", {"foo": {0: 1}}, pid=1, generation=1, member=m1)) == {ErrorCode.none}
    w = c.txn_commit("g", {"foo": {0: 99}}, pid=2, generation=0, member=m2)
    assert codes(w) == {ErrorCode.illegal_generation} and not w.result.records
    c.marker(1, committed=True)
    assert offsets(c.shard) == {("foo", 0): 1}


# Kafka's interplay of pending offsets with group deletion, deleted topics and group expiry.


def test_delete_groups_tombstones_pending_only_partitions_too():
    c = TxnShardContext(FOO)
    commit(c, "g", "", -1, {"foo": {0: 1}})
    c.txn_commit("g", {"foo": {1: 2}}, pid=1)
    mod = schema("delete_groups", 2, "request")
    resp = c.call("delete_groups", mod.DeleteGroupsRequest(groups_names=("g",)), 2)
    assert resp.results[0].error_code == ErrorCode.none
    assert not c.shard.offsets.has_pending("g", "foo", 1)     # Kafka's deleteAllOffsets
    c.marker(1, committed=True)
    assert offsets(c.shard) == {}


def test_a_deleted_topic_tombstones_its_pending_offsets():
    c = TxnShardContext(FOO, BAR)
    c.txn_commit("g", {"foo": {0: 2}}, pid=1)
    c.update_image(BAR)          # foo deleted upstream: Kafka's onPartitionsDeleted
    c.advance(0)
    assert not c.shard.offsets.has_pending("g", "foo", 0)


def test_a_group_with_an_open_transaction_does_not_expire():
    c = TxnShardContext(FOO)
    c.loaded()
    commit(c, "g", "", -1, {"foo": {0: 5}})
    c.txn_commit("g", {"foo": {1: 6}}, pid=1)
    c.advance(c.config.offsets_retention_ms + c.config.offsets_retention_check_interval_ms)
    # foo-0 expired, but "we don't want to remove the group if there are ongoing transactions".
    assert "g" in c.shard.groups
    c.marker(1, committed=True)
    assert offsets(c.shard) == {("foo", 1): 6}
