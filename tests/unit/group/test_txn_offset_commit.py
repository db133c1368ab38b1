"""TxnOffsetCommit on the sans-IO shard (issue 16): validation as Kafka does it, and the
records a transactional commit produces. Markers, fetch, delete and reload are in
test_txn_offset_markers.py; both use `TxnShardContext`, which writes a transactional
commit the way the shell does (the client's producer id) and keeps the log, markers
included, so a reload replays exactly what was written."""
from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.group.bulk_replay import BulkReplay
from coordinator.group.classic.group import ClassicGroup, ClassicGroupState
from coordinator.group.kio_util import schema
from coordinator.group.offsets.txn_commit import TxnOffsetCommit, TxnOffsetWrite, replay_pending, txn_offset_commit
from coordinator.group.shard import GroupCoordinatorShard
from records import OffsetCommitKey, OffsetCommitValue, decode_record, encode_key, encode_value

from .context import ShardContext, topic
from .test_classic_groups import cfg, form_group, join, sync
from .test_consumer_heartbeat import fast

FOO = topic("foo", 4)
BAR = topic("bar", 2)
MARKERS = ("COMMIT", "ABORT")


class TxnShardContext(ShardContext):
    """A ShardContext whose log also holds transactional batches (with their producer id) and
    end markers: `entries` is (offset, key or "COMMIT"/"ABORT", value, producer id)."""

    def __init__(self, *topics, config: CoordinatorConfig | None = None) -> None:
        super().__init__(*topics, config=config)
        self.entries: list[tuple[int, object, bytes | None, int]] = []

    def apply(self, result):
        start = len(self.log)
        out = super().apply(result)
        self.entries.extend((o, k, v, -1) for o, k, v in self.log[start:])
        return out

    def txn_commit(self, group: str, offsets: dict, *, pid: int = 1000, epoch: int = 0, txn_id: str = "tx",
                   generation: int = -1, member: str = "", instance: str | None = None, version: int = 3,
                   metadata: str = "m") -> TxnOffsetWrite:
        req = txn_request(group, offsets, pid=pid, epoch=epoch, txn_id=txn_id, generation=generation,
                          member=member, instance=instance, version=version, metadata=metadata)
        write = txn_offset_commit(self.shard, self.ctx(version), req, self.now_ms)
        base = len(self.log)
        decoded = []
        for rec in write.result.records:   # through the codec, as the state partition holds them
            k, v = encode_key(rec.key), encode_value(rec.value, rec.value_version)
            offset = len(self.log)
            self.log.append((offset, k, v))
            self.entries.append((offset, k, v, pid))
            decoded.append(decode_record(k, v, topic="__test", partition=0, offset=offset))
        replay_pending(self.shard, write._replace(result=write.result._replace(records=decoded)), base)
        return write

    def marker(self, pid: int, committed: bool) -> None:
        """The transaction coordinator's COMMIT/ABORT marker landing in the state partition."""
        offset = len(self.log)
        self.log.append((offset, b"", None))    # a control batch takes an offset too
        self.entries.append((offset, MARKERS[0] if committed else MARKERS[1], None, pid))
        self.shard.replay_end_transaction(pid, committed)

    def reload(self, log=None) -> GroupCoordinatorShard:
        fresh = GroupCoordinatorShard(0, self.config, self.shard.image)
        for offset, key, value, pid in self.entries:
            if key in MARKERS:
                fresh.replay_end_transaction(pid, key == "COMMIT")
            else:
                fresh.replay(decode_record(key, value, topic="__test", partition=0, offset=offset), offset, pid)
        return fresh

    def bulk_reload(self) -> GroupCoordinatorShard:
        loader = BulkReplay(GroupCoordinatorShard(0, self.config, self.shard.image))
        for offset, key, value, pid in self.entries:
            if key in MARKERS:
                loader.end_transaction(pid, key == "COMMIT")
            else:
                assert isinstance(key, bytes)
                loader.add(key, value, offset, pid)
        loader.flush()
        return loader.shard


def txn_request(group: str, offsets: dict, *, pid: int = 1000, epoch: int = 0, txn_id: str = "tx",
                generation: int = -1, member: str = "", instance: str | None = None, version: int = 3,
                metadata: str = "m"):
    mod = schema("txn_offset_commit", version, "request")
    topics = []
    for name, parts in offsets.items():
        ps = tuple(mod.TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                      committed_leader_epoch=7, committed_metadata=metadata)
                   if version >= 2 else
                   mod.TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                      committed_metadata=metadata)
                   for p, o in parts.items())
        topics.append(mod.TxnOffsetCommitRequestTopic(name=name, partitions=ps))
    kw = dict(transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch, topics=tuple(topics))
    if version >= 3:
        kw.update(generation_id=generation, member_id=member, group_instance_id=instance)
    return mod.TxnOffsetCommitRequest(**kw)


def errors(write: TxnOffsetWrite) -> dict:
    return {(t.name, p.partition_index): p.error_code for t in write.result.response.topics for p in t.partitions}


def codes(write: TxnOffsetWrite) -> set:
    return set(errors(write).values())


# ------------------------------------------------------------------ unknown groups
def test_generation_minus_one_to_an_unknown_group_is_accepted_and_stays_pending():
    c = TxnShardContext(FOO)
    w = c.txn_commit("g", {"foo": {0: 10, 1: 11}}, pid=7, epoch=3, txn_id="app-1")
    assert codes(w) == {ErrorCode.none}
    assert (w.transactional_id, w.producer_id, w.producer_epoch, w.group_id) == ("app-1", 7, 3, "g")
    # Replay created a simple classic group (Kafka's replay does), but nothing is committed.
    g = c.group("g")
    assert isinstance(g, ClassicGroup) and g.is_simple()
    assert c.shard.offsets.get("g", "foo", 0) is None
    assert c.shard.offsets.pending_in(7, "g")["foo"][0].offset == 10
    assert c.shard.offsets.has_pending("g", "foo", 1) and not c.shard.offsets.has_pending("g", "foo", 2)


def test_an_unknown_group_with_a_generation_answers_illegal_generation_and_writes_nothing():
    c = TxnShardContext(FOO)
    w = c.txn_commit("g", {"foo": {0: 10}}, generation=4, member="m")
    assert codes(w) == {ErrorCode.illegal_generation}
    assert not w.result.records and "g" not in c.shard.groups


def test_an_empty_group_id_is_invalid():
    c = TxnShardContext(FOO)
    w = c.txn_commit("", {"foo": {0: 1}})
    assert codes(w) == {ErrorCode.invalid_group_id} and not w.result.records


def test_unknown_topics_and_partitions_fail_alone_and_skip_the_group_checks():
    c = TxnShardContext(FOO)
    w = c.txn_commit("g", {"foo": {0: 1, 9: 1}, "nope": {0: 1}})
    assert errors(w) == {("foo", 0): ErrorCode.none, ("foo", 9): ErrorCode.unknown_topic_or_partition,
                         ("nope", 0): ErrorCode.unknown_topic_or_partition}
    assert [(r.key.topic, r.key.partition) for r in w.result.records] == [("foo", 0)]
    # Nothing known left: KafkaApis never calls the coordinator, so no ILLEGAL_GENERATION.
    w = c.txn_commit("h", {"nope": {0: 1}}, generation=5, member="m")
    assert codes(w) == {ErrorCode.unknown_topic_or_partition}


def test_metadata_too_large_fails_only_its_partition():
    c = TxnShardContext(FOO, config=CoordinatorConfig(offset_metadata_max_bytes=3))
    w = c.txn_commit("g", {"foo": {0: 1}}, metadata="four")
    assert codes(w) == {ErrorCode.offset_metadata_too_large} and not w.result.records
    w = c.txn_commit("g", {"foo": {0: 1}}, metadata="abc")
    assert codes(w) == {ErrorCode.none}


# ------------------------------------------------------------------------ records
def test_the_records_are_offset_commits_without_expiry_and_no_timer_is_armed():
    c = TxnShardContext(FOO)
    c.now_ms = 5_000_000
    w = c.txn_commit("g", {"foo": {2: 42}}, version=3, metadata="meta")
    (rec,) = w.result.records
    assert isinstance(rec.key, OffsetCommitKey) and isinstance(rec.value, OffsetCommitValue)
    assert (rec.key.group, rec.key.topic, rec.key.partition) == ("g", "foo", 2)
    assert (rec.value.offset, rec.value.leader_epoch, rec.value.metadata) == (42, 7, "meta")
    assert (rec.value.commit_timestamp, rec.value.expire_timestamp, rec.value_version) == (5_000_000, -1, 4)
    assert rec.value.topic_id == c.id_of("foo")
    assert not w.result.timers
    # v0-1 carry no leader epoch: -1 (NO_PARTITION_LEADER_EPOCH).
    (rec,) = c.txn_commit("g", {"foo": {3: 1}}, version=0).result.records
    assert rec.value.leader_epoch == -1


# ------------------------------------------------------------------ classic groups
def test_classic_group_kip447_member_generation_and_instance_checks():
    c = TxnShardContext(FOO, config=cfg())
    members = form_group(c, "g", 2)
    m = members[0]
    assert codes(c.txn_commit("g", {"foo": {0: 1}}, generation=1, member=m)) == {ErrorCode.none}
    assert codes(c.txn_commit("g", {"foo": {0: 1}}, generation=0, member=m)) == {ErrorCode.illegal_generation}
    assert codes(c.txn_commit("g", {"foo": {0: 1}}, generation=1, member="zombie")) == {ErrorCode.unknown_member_id}
    # No member identity at all: the transactional variant accepts it even in a non-empty
    # group (the transaction coordinator has none to give); OffsetCommit would refuse it.
    assert codes(c.txn_commit("g", {"foo": {0: 1}}, generation=-1)) == {ErrorCode.none}


def test_classic_static_member_fenced_instance_and_completing_rebalance():
    c = TxnShardContext(FOO, config=cfg())
    a = join(c, "g", instance="i1", client="a")
    b = join(c, "g", instance="i2", client="b")
    c.advance(200)
    ra, rb = a.response, b.response
    # COMPLETING_REBALANCE: OffsetCommit answers REBALANCE_IN_PROGRESS, TxnOffsetCommit does not.
    assert c.group("g").state is ClassicGroupState.COMPLETING_REBALANCE
    w = c.txn_commit("g", {"foo": {0: 1}}, generation=1, member=rb.member_id, instance="i2")
    assert codes(w) == {ErrorCode.none}
    assert codes(c.txn_commit("g", {"foo": {0: 1}}, generation=1, member=ra.member_id, instance="i2")) \
        == {ErrorCode.fenced_instance_id}
    assert codes(c.txn_commit("g", {"foo": {0: 1}}, generation=1, member=rb.member_id, instance="i9")) \
        == {ErrorCode.unknown_member_id}
    sync(c, "g", rb.member_id, 1, instance="i2")
    sync(c, "g", ra.leader, 1, {ra.member_id: b"A", rb.member_id: b"B"}, instance="i1")
    assert c.group("g").state is ClassicGroupState.STABLE


# ----------------------------------------------------------------- consumer groups
def _consumer_group_with_revocation(c: TxnShardContext):
    """m1 owns foo 0-3 at epoch 2, then m2 joins: m1 keeps some at epoch 3, loses the rest."""
    c.heartbeat("g", "m1", 0, topics=["foo"])
    c.heartbeat("g", "m2", 0, topics=["foo"])
    r = c.heartbeat("g", "m1", 2, owned={"foo": range(4)})
    kept = c.assigned(r)["foo"]
    r = c.heartbeat("g", "m1", 2, owned={"foo": kept})
    assert r.member_epoch == 3
    return sorted(kept), sorted(set(range(4)) - kept)


def test_consumer_group_kip1251_epochs_and_stale_epoch_answers_illegal_generation():
    c = TxnShardContext(FOO, config=fast())
    kept, revoked = _consumer_group_with_revocation(c)
    # Old epoch 2 for a partition still owned since epoch 2: accepted (KIP-1251, seed 002).
    assert codes(c.txn_commit("g", {"foo": {kept[0]: 5}}, generation=2, member="m1")) == {ErrorCode.none}
    # Old epoch for a partition it lost: a zombie. TxnOffsetCommit <= v5 answers
    # ILLEGAL_GENERATION where OffsetCommit answers STALE_MEMBER_EPOCH; nothing is written.
    w = c.txn_commit("g", {"foo": {kept[0]: 5, revoked[0]: 5}}, generation=2, member="m1")
    assert codes(w) == {ErrorCode.illegal_generation} and not w.result.records
    # A future epoch: stale too, the same mapping.
    assert codes(c.txn_commit("g", {"foo": {kept[0]: 6}}, generation=4, member="m1")) == {ErrorCode.illegal_generation}
    # The current epoch, any partition.
    assert codes(c.txn_commit("g", {"foo": {revoked[0]: 6}}, generation=3, member="m1")) == {ErrorCode.none}
    assert codes(c.txn_commit("g", {"foo": {kept[0]: 6}}, generation=3, member="gone")) == {ErrorCode.unknown_member_id}


def test_consumer_group_accepts_old_versions_and_anonymous_transactional_commits():
    c = TxnShardContext(FOO, config=fast())
    kept, _ = _consumer_group_with_revocation(c)
    # OffsetCommit requires v9+ from consumer-protocol members; TxnOffsetCommit has no such rule.
    assert codes(c.txn_commit("g", {"foo": {kept[0]: 1}}, generation=3, member="m1", version=3)) == {ErrorCode.none}
    # Epoch -1 without member and instance: accepted though the group has members (KIP-1251:
    # "unconditionally accepted if the group is empty, or the commit is transactional").
    assert codes(c.txn_commit("g", {"foo": {kept[0]: 1}}, generation=-1)) == {ErrorCode.none}
    # Epoch -1 naming a member is checked like any other epoch: -1 < the assignment epoch.
    assert codes(c.txn_commit("g", {"foo": {kept[0]: 1}}, generation=-1, member="m1")) == {ErrorCode.illegal_generation}
    # v0-2 carry no member fields at all: the anonymous case.
    assert codes(c.txn_commit("g", {"foo": {kept[0]: 1}}, version=2)) == {ErrorCode.none}


# ---------------------------------------------------------------------- bounds
def test_pending_state_is_bounded_per_producer_per_group_and_per_shard():
    c = TxnShardContext(FOO, BAR, config=_limited(per_producer=3, per_group=2, per_shard=5))
    assert codes(c.txn_commit("g", {"foo": {0: 1, 1: 1, 2: 1}}, pid=1)) == {ErrorCode.none}
    # Re-committing partitions already pending does not grow the state: accepted.
    assert codes(c.txn_commit("g", {"foo": {0: 2, 1: 2}}, pid=1)) == {ErrorCode.none}
    w = c.txn_commit("g", {"foo": {3: 1}}, pid=1, version=4)
    assert codes(w) == {ErrorCode.transaction_abortable} and not w.result.records
    # Below v4 the client does not know TRANSACTION_ABORTABLE: INVALID_TXN_STATE, as Kafka.
    assert codes(c.txn_commit("g", {"foo": {3: 1}}, pid=1, version=3)) == {ErrorCode.invalid_txn_state}
    assert codes(c.txn_commit("g", {"bar": {0: 1}}, pid=2)) == {ErrorCode.none}
    # A third producer in the same group.
    assert codes(c.txn_commit("g", {"bar": {1: 1}}, pid=3, version=5)) == {ErrorCode.transaction_abortable}
    # The shard-wide bound (3 + 1 pending; 2 more would make 6 > 5).
    assert codes(c.txn_commit("h", {"bar": {0: 1, 1: 1}}, pid=4, version=5)) == {ErrorCode.transaction_abortable}
    assert codes(c.txn_commit("h", {"bar": {0: 1}}, pid=4)) == {ErrorCode.none}
    assert c.shard.offsets.pending_total() == 5
    # The end marker frees the producer's share.
    c.marker(1, committed=False)
    assert c.shard.offsets.pending_total() == 2
    assert codes(c.txn_commit("g", {"foo": {3: 1}}, pid=1)) == {ErrorCode.none}


def test_open_groups_per_producer_and_open_producers_per_shard_are_bounded_too():
    """OffsetDelete empties a producer's pending offsets in a group, but the group stays open
    for it until the marker: open groups count against the producer's bound, and producers
    against the shard's."""
    c = TxnShardContext(FOO, config=_limited(per_producer=2, per_group=10, per_shard=3))
    delete = schema("offset_delete", 0, "request")
    for group in ("g1", "g2"):
        assert codes(c.txn_commit(group, {"foo": {0: 1}}, pid=1)) == {ErrorCode.none}
        c.call("offset_delete", delete.OffsetDeleteRequest(group_id=group, topics=(delete.OffsetDeleteRequestTopic(
            name="foo", partitions=(delete.OffsetDeleteRequestPartition(partition_index=0),)),)), 0)
    assert c.shard.offsets.pending_total() == 0
    assert codes(c.txn_commit("g3", {"foo": {0: 1}}, pid=1, version=5)) == {ErrorCode.transaction_abortable}
    assert codes(c.txn_commit("g1", {"foo": {1: 1}}, pid=1)) == {ErrorCode.none}    # an open group: fine
    assert codes(c.txn_commit("h", {"foo": {0: 1}}, pid=2)) == {ErrorCode.none}
    assert codes(c.txn_commit("h", {"foo": {1: 1}}, pid=3)) == {ErrorCode.none}
    assert codes(c.txn_commit("h", {"foo": {2: 1}}, pid=4, version=5)) == {ErrorCode.transaction_abortable}
    c.marker(1, committed=True)
    assert codes(c.txn_commit("g3", {"foo": {0: 1}}, pid=4)) == {ErrorCode.none}
    assert c.shard.offsets.pending_total() == sum(c.shard.offsets.pending_counts.values()) == 3


def _limited(*, per_producer: int, per_group: int, per_shard: int) -> CoordinatorConfig:
    """A config with the txn_* limits (CoordinatorConfig fields; `limits_of` reads them by name)."""
    return CoordinatorConfig(txn_max_pending_per_producer=per_producer, txn_max_open_producers_per_group=per_group,
                             txn_max_pending_per_shard=per_shard)


@pytest.mark.parametrize("version", range(6))
def test_the_shape_carries_its_versions_answer(version):
    """The handler reads no version: the shape's answer classes and its refusal codes (INVALID_TXN_STATE
    stands for TRANSACTION_ABORTABLE below v4)."""
    shape = TxnOffsetCommit(txn_request("g", {"foo": {0: 1}}, version=version))
    assert shape.response_schema is schema("txn_offset_commit", version)
    assert shape.refusal_code(ErrorCode.transaction_abortable) is (
        ErrorCode.transaction_abortable if version >= 4 else ErrorCode.invalid_txn_state)
