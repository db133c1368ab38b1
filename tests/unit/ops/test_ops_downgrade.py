"""KIP-915 downgrade check on logs written by kcoord's own coordinator and by the generator
(full classic -> consumer -> classic cycles)."""
from __future__ import annotations

import struct

import pytest

from ops import downgrade
from ops.generator import GeneratorSpec
from ops.logsource import OffsetsLogError, Problems
from ops.materialise import OffsetsReplay
from ops.segment import iter_buffer
from records import OffsetCommitKey, encode_key
from records.batch import build_batch
from tests.unit.group.context import ShardContext, topic
from tests.unit.group.test_offsets_and_admin import commit as commit_request

from .logs import LogBuilder, commit, generated_batches

FOO = topic("foo", 4)


def run_check(batches, problems=None):
    problems = problems if problems is not None else Problems()
    new = downgrade.NewProtocolRecords()
    full = OffsetsReplay(problems, on_record=new.observe)
    classic = OffsetsReplay(problems, decode=downgrade.classic_only_decode)
    for lb in batches:
        full.feed(lb)
        classic.feed(lb)
    return downgrade.check(full, classic, new), full, new


def coordinator_log(ctx: ShardContext) -> list:
    """The records the coordinator wrote, as the batches of a state-topic partition."""
    pairs = [(k, v) for _, k, v in ctx.log]
    buf = b"".join(build_batch([p], base_offset=i, timestamp_ms=1_000 + i) for i, p in enumerate(pairs))
    return list(iter_buffer(buf, len(buf), "kcoord-shard-0", 0, Problems()))


def test_a_live_consumer_group_from_kcoord_would_lose_its_members():
    ctx = ShardContext(FOO)
    ctx.heartbeat("cg", "m1", 0, topics=["foo"])
    ctx.heartbeat("cg", "m2", 0, topics=["foo"])
    epoch = ctx.member("cg", "m1").member_epoch
    commit_request(ctx, "cg", "m1", epoch, {"foo": {0: 10}})
    commit_request(ctx, "classic-simple", "", -1, {"foo": {1: 7}})
    report, _, _ = run_check(coordinator_log(ctx))
    groups = {g["group"]: g for g in report["groups"]}
    assert report["groups_losing_state"] == ["cg"]
    assert groups["cg"]["full"]["type"] == "consumer" and groups["cg"]["full"]["members"] == 2
    assert groups["cg"]["classic_view"]["type"] == "classic" and groups["cg"]["classic_view"]["simple"]
    assert any("downgrade these consumers first" in r for r in groups["cg"]["reasons"])
    assert groups["cg"]["new_protocol_records"]["CONSUMER_GROUP_MEMBER_METADATA"] == 2
    assert not groups["classic-simple"]["would_lose_state"]
    # Offsets survive the downgrade: types 0-2 only.
    assert report["offsets"] == {"compared": 2, "missing": [], "different": [],
                                 "only_in_classic_view": []}


def test_an_emptied_group_keeps_offsets_and_gets_conversion_tombstones():
    ctx = ShardContext(FOO)
    ctx.heartbeat("cg", "m1", 0, topics=["foo"])
    commit_request(ctx, "cg", "m1", ctx.member("cg", "m1").member_epoch, {"foo": {0: 10}})
    ctx.heartbeat("cg", "m1", -1)
    log = coordinator_log(ctx)
    report, full, new = run_check(log)
    (g,) = report["groups"]
    assert not g["would_lose_state"] and "empty consumer group" in g["reasons"][0]
    assert g["live_new_protocol_keys"] > 0
    items, skipped = downgrade.tombstones(full, new)
    assert not skipped
    assert [t["type"] for t in items] == ["CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA",
                                          "CONSUMER_GROUP_PARTITION_METADATA",
                                          "CONSUMER_GROUP_METADATA"]
    # Appending them (as --apply would) leaves no new-protocol key alive and the offsets intact.
    tomb = downgrade.tombstone_batches(items, 5_000)
    after, full_after, new_after = run_check(log + tomb)
    assert not new_after.live and after["verdict"] == "no state lost"
    assert after["offsets"]["compared"] == 1 and not after["offsets"]["missing"]
    assert "cg" not in full_after.groups()


def test_groups_with_members_are_left_alone_by_the_tombstones():
    ctx = ShardContext(FOO)
    ctx.heartbeat("cg", "m1", 0, topics=["foo"])
    _, full, new = run_check(coordinator_log(ctx))
    items, skipped = downgrade.tombstones(full, new)
    assert items == [] and skipped[0]["group"] == "cg"


def test_full_upgrade_downgrade_cycles_lose_nothing_once_classic_again():
    batches = generated_batches(GeneratorSpec(records=20_000, groups=30, seed=11, partitions=3,
                                              cycle_fraction=1.0, transactional_fraction=0,
                                              ephemeral_fraction=0, consumer_fraction=0))
    report, full, _ = run_check(batches)
    by_type = {g["group"]: g["full"]["type"] for g in report["groups"]}
    assert "classic" in by_type.values() and "consumer" in by_type.values()
    downgraded = 0
    for g in report["groups"]:
        if g["full"]["type"] == "classic":
            assert not g["would_lose_state"], g
            assert g["classic_view"]["generation"] == g["full"]["generation"]
            # The conversion tombstones removed every consumer-group key (KIP-915).
            assert g["live_new_protocol_keys"] == 0
            downgraded += g["new_protocol_records"].get("CONSUMER_GROUP_METADATA", 0) > 0
        elif g["full"]["type"] == "consumer":
            assert g["would_lose_state"]
    assert downgraded > 0   # classic again after at least one full cycle


def test_future_offset_commit_version_is_read_at_the_highest_known_version():
    key = encode_key(OffsetCommitKey("g", "t", 0))
    # Version 5 = version 4's fields plus a tagged field a classic coordinator skips.
    v5 = struct.pack(">hqibqb", 5, 77, -1, 1, 1_000, 1) + b"\x05\x02hi"
    log = LogBuilder().write(commit("g", "t", 1, 3), raw=[(key, v5)])
    with pytest.raises(OffsetsLogError, match="unknown value version 5"):
        run_check(log.log_batches())    # the full replay fails the load, like Kafka 4.3
    problems = Problems(skip=True, echo=False)
    report, _, _ = run_check(log.log_batches(), problems)
    assert report["offsets"]["only_in_classic_view"] == [
        {"group": "g", "topic": "t", "partition": 0, "offset": 77}]


def test_unknown_types_are_counted_per_group_from_their_key():
    share_key = (11).to_bytes(2, "big") + b"\x00\x05share"
    log = LogBuilder().write(commit("share", "t", 0, 1), raw=[(share_key, b"\x00\x00\x00")])
    report, _, new = run_check(log.log_batches())
    (g,) = report["groups"]
    assert g["new_protocol_records"] == {"unknown": 1} and g["live_new_protocol_keys"] == 1
    assert report["summary"]["skipped_by_classic_view"] == {"11": 1}
