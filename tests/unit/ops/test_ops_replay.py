"""Replay of offsets logs with the coordinator's own Replayer: markers, tombstones,
compaction semantics, generated logs with conversions, and the describe layout."""
from __future__ import annotations

from collections import defaultdict

import pytest

from coordinator.group.classic.group import ClassicGroup
from coordinator.group.modern.consumer.group import ConsumerGroup
from ops.describe import render_text, replay_model
from ops.generator import GeneratorSpec, image
from ops.logsource import LogBatch, OffsetsLogError, Problems
from ops.materialise import OffsetsReplay
from records import UnknownRecord
from records.batch import RecordBatch

from .logs import LogBuilder, commit, empty_group, generated_batches, offset_tombstone


def offsets_of(replay: OffsetsReplay) -> dict:
    return {(o["topic"], o["partition"]): o["offset"]
            for g in replay_model(replay)["groups"] for o in g["offsets"]}


def test_transactional_offsets_apply_on_commit_and_vanish_on_abort():
    log = (LogBuilder()
           .write(commit("g", "t", 0, 10))
           .write(commit("g", "t", 0, 20), producer_id=7)         # pending until COMMIT
           .write(commit("g", "t", 1, 30), producer_id=8)         # pending until ABORT
           .marker(8, committed=False)
           .marker(7, committed=True))
    replay = OffsetsReplay().feed_all(log.log_batches())
    assert offsets_of(replay) == {("t", 0): 20}
    assert replay.stats.commit_markers == 1 and replay.stats.abort_markers == 1


def test_open_transaction_stays_pending_and_is_reported_in_the_model():
    log = LogBuilder().write(commit("g", "t", 0, 10)).write(commit("g", "t", 0, 99), producer_id=3)
    model = replay_model(OffsetsReplay().feed_all(log.log_batches()))
    (group,) = model["groups"]
    assert group["offsets"][0]["offset"] == 10
    assert group["pending_transactional_offsets"] == [
        {"producer_id": 3, "topic": "t", "partition": 0, "offset": 99}]


def test_commit_marker_does_not_override_a_later_plain_commit():
    # Kafka: COMMIT materialises a pending offset only if its record offset is later.
    log = (LogBuilder()
           .write(commit("g", "t", 0, 5), producer_id=1)
           .write(commit("g", "t", 0, 6))
           .marker(1, committed=True))
    assert offsets_of(OffsetsReplay().feed_all(log.log_batches())) == {("t", 0): 6}


def test_offset_tombstone_removes_offset_and_pending_entry():
    log = (LogBuilder()
           .write(commit("g", "t", 0, 5), commit("g", "t", 1, 6))
           .write(commit("g", "t", 1, 9), producer_id=1)
           .write(offset_tombstone("g", "t", 1))
           .marker(1, committed=True))
    assert offsets_of(OffsetsReplay().feed_all(log.log_batches())) == {("t", 0): 5}


def test_group_tombstone_deletes_the_classic_group():
    from records import CoordinatorRecord, GroupMetadataKey
    log = (LogBuilder().write(empty_group("gone")).write(empty_group("kept"))
           .write(CoordinatorRecord(GroupMetadataKey("gone"), None, 0)))
    groups = OffsetsReplay().feed_all(log.log_batches()).groups()
    assert set(groups) == {"kept"}


def compact(batches: list[LogBatch]) -> list[LogBatch]:
    """What Kafka's log cleaner leaves: aborted transactional data removed, then only the
    last record of each key, markers kept, each batch keeping its survivors in order."""
    open_txn, aborted = defaultdict(list), set()
    for i, lb in enumerate(batches):
        b = lb.batch
        if b.is_control_batch:
            txn = open_txn.pop((lb.partition, b.producer_id), [])
            if b.control_type == 0:
                aborted.update(txn)
        elif b.is_transactional:
            open_txn[(lb.partition, b.producer_id)].append(i)
    live = [(i, lb) for i, lb in enumerate(batches) if i not in aborted]
    last = {(lb.partition, r.key): r.offset for _, lb in live if not lb.batch.is_control_batch
            for r in lb.batch.records}
    out = []
    for _, lb in live:
        b = lb.batch
        if b.is_control_batch:
            out.append(lb)
            continue
        keep = [r for r in b.records if last[(lb.partition, r.key)] == r.offset]
        if keep:
            out.append(LogBatch(lb.source, lb.partition, RecordBatch(
                b.position, b.size, b.magic, b.base_offset, b.last_offset, -1, b.producer_id,
                b.producer_epoch, -1, b.is_transactional, False, 0, keep)))
    return out


def test_replaying_a_compacted_log_gives_the_same_state():
    spec = GeneratorSpec(records=6000, groups=16, seed=3, partitions=2)
    batches = generated_batches(spec)
    # Compaction removes the old subscription records that name topic ids in the log, so
    # both sides name them from the cluster's metadata, as --topics-from does.
    full = replay_model(OffsetsReplay().feed_all(batches), image=image(spec))
    compacted_batches = compact(batches)
    assert sum(len(lb.batch.records) for lb in compacted_batches) < \
        sum(len(lb.batch.records) for lb in batches) / 2
    compacted = replay_model(OffsetsReplay().feed_all(compacted_batches), image=image(spec))
    assert compacted["groups"] == full["groups"]


@pytest.fixture(scope="module")
def generated():
    return generated_batches(GeneratorSpec(records=25_000, groups=40, seed=11, partitions=4))


def test_generated_log_replays_cleanly_with_both_protocols(generated):
    replay = OffsetsReplay(Problems()).feed_all(generated)
    kinds = {type(g) for _, g in replay.groups().values()}
    assert kinds == {ClassicGroup, ConsumerGroup}
    assert replay.stats.commit_markers > 0 and replay.stats.abort_markers > 0
    assert replay.stats.tombstones > 0
    assert set(replay.unknown_record_types()) >= {10, 11, 18, 42}
    assert not replay.problems


def test_generated_cycle_groups_convert_both_ways(generated):
    seen = defaultdict(list)

    def observe(partition, record, offset, ts):
        if isinstance(record, (RecordBatch, UnknownRecord)):
            return
        group = getattr(record.key, "group", None) or record.key.group_id
        if "cycle" not in group:
            return
        kind = type(replay.shards[partition].groups.get(group)).__name__
        if not seen[group] or seen[group][-1] != kind:
            seen[group].append(kind)

    replay = OffsetsReplay(on_record=observe)
    replay.feed_all(generated)
    full_cycles = [g for g, kinds in seen.items()
                   if "ClassicGroup" in kinds[kinds.index("ConsumerGroup"):]]
    assert full_cycles, dict(seen)


def test_damaged_record_names_source_and_offset():
    log = LogBuilder().write(raw=[(b"\x00\x01\x00\x01g", b"\x00\x04")])
    with pytest.raises(OffsetsLogError, match=r"test-0 at byte 0 \(log offset 0\)"):
        OffsetsReplay().feed_all(log.log_batches())
    problems = Problems(skip=True, echo=False)
    OffsetsReplay(problems).feed_all(log.log_batches())
    assert problems.items[0].skipped == "record" and "OffsetCommitKey" in problems.items[0].reason


def test_text_layout_has_kafka_consumer_groups_headers(generated):
    text = render_text(replay_model(OffsetsReplay().feed_all(generated)))
    for header in ("GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH "
                   "#MEMBERS", "GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH "
                   "CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT", "GROUP TOPIC PARTITION "
                   "LEADER-EPOCH CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID"):
        assert header in " ".join(text.split()), header
    assert "skipped unknown record types (KIP-915)" in text


def test_text_layout_shows_partitions_pending_revocation_as_kafka_describes_them():
    # A member in UNREVOKED_PARTITIONS still owns the partitions it must revoke: Kafka's
    # ConsumerGroupDescribe (so kafka-consumer-groups --describe) lists them in its assignment.
    from ..group.context import ShardContext
    from ..group.test_consumer_heartbeat import FOO, fast

    c = ShardContext(FOO, config=fast())
    c.heartbeat("g", "m1", 0, topics=["foo"])
    c.heartbeat("g", "m2", 0, topics=["foo"])
    c.heartbeat("g", "m1", 2, owned={"foo": range(6)})
    log = LogBuilder().write(raw=[(k, v) for _, k, v in c.log])
    replay = OffsetsReplay().feed_all(log.log_batches())
    replay.use_image(c.shard.image)
    replay.topic_names.update({t.topic_id: t.name for t in c.shard.image.topics_by_id.values()})
    model = replay_model(replay)
    (g,) = model["groups"]
    m1 = next(m for m in g["members"] if m["member_id"] == "m1")
    assert m1["state"] == "UNREVOKED_PARTITIONS" and len(m1["assignment"]["foo"]) == 3
    revoking = m1["partitions_pending_revocation"]["foo"]
    assert len(revoking) == 3
    rows = {line.split()[1]: line.split() for line in render_text(model).splitlines()
            if line.startswith("g ") and len(line.split()) >= 9}
    assert rows["m1"][4] == "6" and rows["m1"][6] == "foo:0,1,2,3,4,5"     # #PARTITIONS, CURRENT
