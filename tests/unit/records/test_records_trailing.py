"""Bytes after a key or value struct (issue 10 §7): Kafka's generated readers stop at the
end of the struct and load the record, so kcoord loads it too, counts it and warns."""

from __future__ import annotations

import logging

import pytest

from records import (
    TRAILING_BYTES, CoordinatorRecord, OffsetCommitKey, OffsetCommitValue, decode_key,
    decode_record, decode_value, encode_key, encode_value,
)
from records import _trailing
from records.codec import _KEY_CACHE, decode_offset_commit_fields, decode_offset_commit_key

from test_records_vectors import KEYS, VALUES

EXTRA = b"\x00\x07\xff"  # what follows the struct: arbitrary, even an invalid-looking tag


@pytest.fixture(autouse=True)
def fresh_counter():
    TRAILING_BYTES.reset()
    _KEY_CACHE.clear()
    yield
    TRAILING_BYTES.reset()
    _KEY_CACHE.clear()


@pytest.mark.parametrize("name,record_type,version,value,data", VALUES, ids=[v[0] for v in VALUES])
def test_value_with_trailing_bytes_loads_as_without(name, record_type, version, value, data):
    assert decode_value(record_type, data + EXTRA, topic="t", partition=3, offset=77) == \
        (value, version)
    assert TRAILING_BYTES.records == 1 and TRAILING_BYTES.bytes == len(EXTRA)
    assert TRAILING_BYTES.last == ("t", 3, 77, "value", len(EXTRA))


@pytest.mark.parametrize("key,data", KEYS, ids=[type(k).__name__ + str(i) for i, (k, _) in enumerate(KEYS)])
def test_key_with_trailing_bytes_loads_as_without(key, data):
    assert decode_key(data + EXTRA, topic="t", partition=0, offset=9) == key
    assert TRAILING_BYTES.last == ("t", 0, 9, "key", len(EXTRA))


def test_decode_record_counts_every_record_not_every_distinct_key(caplog):
    key = encode_key(OffsetCommitKey("g", "t", 0)) + b"\x00"
    value = encode_value(OffsetCommitValue(offset=5, commit_timestamp=1))
    with caplog.at_level(logging.WARNING, logger="kcoord.records"):
        for offset in range(3):
            record = decode_record(key, value, topic="__kcoord_offsets", partition=4, offset=offset)
            assert record == CoordinatorRecord(OffsetCommitKey("g", "t", 0), record.value, 4)
            assert record.value.offset == 5
    # The key is not cached with its trailing bytes: each record is counted.
    assert TRAILING_BYTES.records == 3
    assert "topic __kcoord_offsets, partition 4, offset 2" in caplog.records[-1].getMessage()
    assert "OffsetCommitKey key" in caplog.records[-1].getMessage()


def test_offset_commit_fast_paths_fall_back_and_load():
    # v4 with empty metadata is 24 bytes: the fast paths require exactly that size.
    value = encode_value(OffsetCommitValue(offset=11, leader_epoch=2, commit_timestamp=3)) + b"\x01"
    key = encode_key(OffsetCommitKey("g", "t", 1))
    assert decode_record(key, value).value.offset == 11
    fields = decode_offset_commit_fields(OffsetCommitKey("g", "t", 1), value, offset=5)
    assert fields[:2] == (11, 2)
    assert decode_offset_commit_key(key + b"\x00", offset=6) == OffsetCommitKey("g", "t", 1)
    assert TRAILING_BYTES.records == 3


def test_warnings_are_rate_limited_but_every_record_is_counted(caplog, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(_trailing.time, "monotonic", lambda: clock[0])
    value = encode_value(OffsetCommitValue(offset=1)) + b"\x00"
    with caplog.at_level(logging.WARNING, logger="kcoord.records"):
        for offset in range(1000):
            decode_value(1, value, topic="t", partition=0, offset=offset)
        first = len(caplog.records)
        clock[0] += _trailing.WARN_INTERVAL_S
        decode_value(1, value, topic="t", partition=0, offset=1000)
    assert TRAILING_BYTES.records == 1001
    # The first few name their offsets, then one line per interval.
    assert first == _trailing._FIRST_WARNINGS
    assert len(caplog.records) == first + 1
    last = caplog.records[-1].getMessage()
    assert "offset 1000" in last and f"({1000 - first} more since the last warning)" in last


def test_well_formed_records_are_not_counted():
    for _, record_type, version, value, data in VALUES:
        decode_value(record_type, data)
    for _, data in KEYS:
        decode_key(data)
    assert TRAILING_BYTES.records == 0
