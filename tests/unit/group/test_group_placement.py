"""Group placement: Kafka's `Utils.abs(hashCode) % n` (GroupCoordinatorService.partitionFor),
the legacy `(hashCode & 0x7fffffff) % n` kept for topics an earlier kcoord wrote, the
partitioner marker's format, and the loader's skip of it."""
from __future__ import annotations

import uuid

import pytest

from coordinator.group.hashing import (
    KAFKA,
    LEGACY,
    PARTITIONERS,
    java_abs,
    java_string_hash,
    legacy_partition_for,
    partition_for,
)
from coordinator.runtime.epoch_producers import fence_record
from coordinator.runtime.log_records import PARTITIONER_MARKER_TYPE, is_log_record
from coordinator.service.routing import ShardRouter
from records import UnknownRecord, decode_record
from records.partitioner_records import (
    PARTITIONER_MARKER,
    is_partitioner_marker,
    marker_partitioner,
    marker_record,
)

MIN_INT = -(2 ** 31)


def test_kafka_negates_a_negative_hash_where_the_legacy_formula_masked_it():
    # Java: "replay-ab588cff".hashCode() == -1544171307; Kafka 4.4 wrote this group to
    # partition 2 of a 5-partition __consumer_offsets (1544171307 % 5 == 2).
    assert java_string_hash("replay-ab588cff") == -1544171307
    assert partition_for("replay-ab588cff", 5) == 2
    assert legacy_partition_for("replay-ab588cff", 5) == (-1544171307 & 0x7FFFFFFF) % 5 == 1


def test_integer_min_value_maps_to_zero_as_in_kafkas_utils_abs():
    assert java_string_hash("polygenelubricants") == MIN_INT
    assert java_abs(MIN_INT) == 0 and java_abs(-5) == 5 and java_abs(7) == 7
    assert all(partition_for("polygenelubricants", n) == 0 for n in (1, 3, 5, 7, 50))


def test_the_two_formulas_agree_exactly_on_non_negative_hashes():
    names = [f"g-{i}" for i in range(2000)]
    for n in (1, 5, 50):
        differ = [g for g in names if partition_for(g, n) != legacy_partition_for(g, n)]
        assert all(java_string_hash(g) < 0 for g in differ)
    negative = [g for g in names if java_string_hash(g) < 0]
    assert len([g for g in negative if partition_for(g, 50) != legacy_partition_for(g, 50)]) > len(negative) // 2


def test_partitioners_are_frozen_and_named():
    assert PARTITIONERS == {"kafka": KAFKA, "legacy": LEGACY}
    with pytest.raises(AttributeError):
        KAFKA.name = "legacy"  # type: ignore[misc]
    assert LEGACY.partition_for("replay-ab588cff", 5) == 1


def test_the_router_places_groups_with_the_partitioner_it_was_given():
    assert ShardRouter([], 5).partition_for("replay-ab588cff") == 2     # Kafka's, by default
    assert ShardRouter([], 5, LEGACY).partition_for("replay-ab588cff") == 1


def test_the_marker_is_a_private_type_with_a_key_of_its_own():
    key, value = marker_record("kafka")
    assert int.from_bytes(key[:2], "big") == PARTITIONER_MARKER == PARTITIONER_MARKER_TYPE
    assert marker_record("kafka")[0] != key, "every marker has its own key: compaction keeps them all"
    assert is_partitioner_marker(key) and marker_partitioner(key, value) == "kafka"
    assert value == b"\x00\x00\x00\x05kafka"
    fixed = uuid.UUID(int=1)
    assert marker_record("kafka", fixed)[0] == b"\x05\x14" + fixed.bytes
    # Kafka's and an older kcoord's codec: an unknown type, skipped (KIP-915).
    assert isinstance(decode_record(key, value), UnknownRecord)


@pytest.mark.parametrize("value", [None, b"", b"\x00\x01\x00\x05kafka", b"\x00\x00\x00\x06kafka",
                                   b"\x00\x00\x00\x05kafkaX", b"\x00\x00\xff\xffkafka", b"\x00\x00\x00\x02\xff\xfe"])
def test_a_marker_value_kcoord_cannot_read_names_nothing(value):
    key, _ = marker_record("kafka")
    assert marker_partitioner(key, value) is None


def test_a_marker_names_nothing_under_another_key():
    _, value = marker_record("kafka")
    assert marker_partitioner(b"\x00\x01group", value) is None
    assert marker_partitioner(b"\x05\x14short", value) is None
    with pytest.raises(ValueError):
        marker_record("")


def test_the_loader_skips_markers_and_fence_records_only():
    assert is_log_record(marker_record("kafka")[0]) and is_log_record(fence_record(0, 1, 1)[0])
    assert not is_log_record(b"\x00\x01group") and not is_log_record(None) and not is_log_record(b"\x04\xb0x")


def test_a_service_loads_past_the_marker_and_routes_with_its_partitioner(caplog):
    import asyncio
    import logging

    from coordinator.config import CoordinatorConfig
    from coordinator.service import GroupCoordinatorService
    from records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value

    from ..runtime.fakes import FakeStateTopic

    def commit(offset: int) -> tuple[bytes, bytes]:
        return (encode_key(OffsetCommitKey(group="replay-ab588cff", topic="t", partition=0)),
                encode_value(OffsetCommitValue(offset=offset, metadata="", commit_timestamp=1), 3))

    async def loaded(partitioner):
        log = FakeStateTopic(5)
        log.logs[0].append(marker_record("kafka"))
        log.logs[1].append(commit(11))        # where the legacy placement put the group
        log.logs[2].append(commit(22))        # where Kafka's does
        service = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=5), log,  # type: ignore[arg-type]
                                          partitioner=partitioner)
        await service.start()
        try:
            shard = service.runtime_for("replay-ab588cff").shard
            return service.partition_for("replay-ab588cff"), shard.offsets.get("replay-ab588cff", "t", 0).offset
        finally:
            service.close()

    with caplog.at_level(logging.WARNING, logger="kcoord"):
        assert asyncio.run(loaded(KAFKA)) == (2, 22)
        assert asyncio.run(loaded(LEGACY)) == (1, 11)
    assert not [r for r in caplog.records if "unknown type" in r.getMessage()], "the marker is never replayed"
