"""Every reader of the state topic drops kcoord's aborted transactional batches (issue 14
point 2): the fenced loader (FencedStateLog's reader), `kcoord offsets` replay
(ops.materialise.OffsetsReplay, bulk and per-record paths) and `kcoord offsets load`
(ops.load.plan). A log as a fenced shard leaves it: a committed kcoord transaction, a
zombie's transaction aborted by the new owner's fence, and a transaction still open."""
from __future__ import annotations

import asyncio

import pytest

from coordinator.runtime.fenced_state_log import FencedStateLog, _Reader
from ops.load import LoadPlan, plan
from ops.logsource import Problems
from ops.materialise import OffsetsReplay
from ops.segment import iter_buffer
from records import (
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from records.batch import ControlMarker, build_batch, build_control_batch

PID = 7


def _group(gid: str) -> tuple[bytes, bytes | None]:
    return encode_key(ConsumerGroupMetadataKey(gid)), encode_value(ConsumerGroupMetadataValue(epoch=1))


def _commit(gid: str, offset: int) -> tuple[bytes, bytes | None]:
    return (encode_key(OffsetCommitKey(group=gid, topic="t", partition=0)),
            encode_value(OffsetCommitValue(offset=offset, metadata="", commit_timestamp=1), 3))


def _log() -> bytes:
    txn = dict(timestamp_ms=1, producer_id=PID, transactional=True)
    return b"".join([
        build_batch([_group("g1"), _commit("g1", 5)], base_offset=0, producer_epoch=0, base_sequence=0, **txn),
        build_control_batch(ControlMarker.COMMIT, base_offset=2, timestamp_ms=1, producer_id=PID, producer_epoch=0),
        # the zombie's batch, aborted by the next owner's fence (epoch 1)
        build_batch([_group("zombie"), _commit("g1", 99)], base_offset=3, producer_epoch=0, base_sequence=2, **txn),
        build_control_batch(ControlMarker.ABORT, base_offset=5, timestamp_ms=1, producer_id=PID, producer_epoch=1),
        # not committed yet when the log is read
        build_batch([_group("open")], base_offset=6, producer_epoch=1, base_sequence=0, **txn),
    ])


def _batches():
    data = _log()
    return list(iter_buffer(data, len(data), "test", 0, Problems()))


def test_the_fenced_loader_applies_committed_batches_only():
    data = _log()
    seen: list[int] = []
    reader = _Reader(0, lambda p, o, k, v: seen.append(o))
    assert reader.feed(data, 0) == 7
    assert seen == [0, 1]
    assert reader.aborted == 1 and list(reader.held) == [PID] and [o for o, _, _ in reader.held[PID]] == [6]


def test_offsets_replay_drops_aborted_and_open_group_records():
    for hook in (None, lambda *a: None):         # the bulk path and the per-record path
        replay = OffsetsReplay(on_record=hook).feed_all(_batches())
        groups = replay.groups()
        assert set(groups) == {"g1"}, f"hook={hook}: {sorted(groups)}"
        offsets = replay.shards[0].offsets.get("g1", "t", 0)
        assert offsets is not None and offsets.offset == 5
        assert replay.stats.aborted_group_records == 1 and replay.stats.open_group_records == 1


def test_offsets_load_copies_committed_records_only():
    result = LoadPlan(1)
    copied = list(plan(_batches(), 1, result))
    assert [key for _, key, _, _ in copied] == [_group("g1")[0], _commit("g1", 5)[0]]
    assert result.open_txn_records == 1


def test_downgrade_check_says_aborted_records_must_be_stripped_before_moving_to_kafka():
    from ops import downgrade

    new_records = downgrade.NewProtocolRecords()
    full = OffsetsReplay(on_record=new_records.observe).feed_all(_batches())
    classic = OffsetsReplay(decode=downgrade.classic_only_decode).feed_all(_batches())
    report = downgrade.check(full, classic, new_records)
    assert report["aborted_group_records"]["aborted"] == 1      # the zombie's group record
    assert report["aborted_group_records"]["open"] == 1
    assert "Kafka's loader would apply them" in report["aborted_group_records"]["note"]
    assert report["verdict"] in ("aborted records must be stripped", "state would be lost")


def test_the_fenced_log_keeps_its_names_over_its_parts_and_its_load_fences_first():
    """FencedStateLog is made of links, producer sessions and reads; the names callers,
    benches and tests use reach the parts, and a load runs the fence step before a fetch."""
    log = FencedStateLog("127.0.0.1:1", "__t", 2, take_on_load=False)
    assert log.takeover is None, "a read-only reader has no fence step"

    async def pause(partition: int) -> None: ...
    log.before_end_txn = pause
    log.concurrent_retries = 3
    assert log.producers.before_end_txn is pause and log.producers.concurrent_retries == 3
    assert log.open_transactions is log.reads.open_transactions and log._coordinators is log.links.coordinators
    owner = FencedStateLog("127.0.0.1:1", "__t", 2)
    assert owner.takeover == owner.take
    steps: list[str] = []

    async def fence(p: int) -> None:
        steps.append(f"fence {p}")
        raise RuntimeError("refused")

    async def fetch(p: int, offset: int, wait: int) -> None:
        steps.append(f"fetch {p}")
        raise AssertionError("a partition is read only after its fence")

    owner.links.brokers = {1: ("127.0.0.1", 1)}
    owner.links.fetch = fetch   # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        asyncio.run(owner.load([0], lambda *a: None, lambda *a: None, fence=fence))
    assert steps == ["fence 0"]
