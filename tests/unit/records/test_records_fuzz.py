"""Mutation fuzzing of the record codec (issue 10 §1, bounded decoding).

Start from valid encodings (the hand-written vectors and generated records), then
truncate, plant length bombs, break varints or splice random bytes. `decode_record`
must return a record or raise one of `records.DECODE_ERRORS`; any other exception
(MemoryError, IndexError, struct.error, OverflowError, ...) is a codec bug. The
allocation check: a length bomb must be refused from the bytes left, so the test
also bounds the memory a decode may take. fuzz/atheris_records.py runs the same
property with coverage guidance for longer.
"""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_records_vectors import KEYS, VALUES

from records import _wire, codec
from records import (
    DECODE_ERRORS,
    CoordinatorRecord,
    OffsetCommitKey,
    UnknownRecord,
    decode_key,
    decode_record,
    decode_value,
)
from records.batch import CorruptBatchError, build_batch, iter_batches
from records.codec import decode_offset_commit_fields, decode_offset_commit_key
from support.allocation import allocation_peak

# (key bytes, value bytes) pairs whose key and value types agree, so mutations start
# from records that decode.
_KEY_BY_TYPE = {}
for _key, _data in KEYS:
    _KEY_BY_TYPE.setdefault(_key.record_type, _data)
SEEDS = [(_KEY_BY_TYPE[rtype], data) for _, rtype, _, _, data in VALUES]

# Lengths that break naive readers: the null markers, the signed/unsigned edges of
# every width Kafka uses, and "just one more than the bytes left".
_BOMB_INT16 = [-2, -1, 0x7FFF, -0x8000]
_BOMB_INT32 = [-2, -1, 0x7FFFFFFF, -0x80000000, 0x3FFFFFFF]
_BOMB_UVARINTS = [b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x07", b"\x80\x80\x80\x80\x10",
                  b"\xff\xff\xff\xff\xff\x01", b"\x80\x00", b"\xfe\xff\xff\x7f", b"\x80\x80\x04"]

MEMORY_BOUND = 4 * 1024 * 1024  # no decode of a < 1 KB record may take more than this


def _mutate(data: st.DataObject, b: bytes) -> bytes:
    out = bytearray(b)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        op = data.draw(st.sampled_from(
            ["truncate", "int16", "int32", "uvarint", "bad_varint", "random", "flip", "insert"]))
        i = data.draw(st.integers(0, max(len(out) - 1, 0)), label="at")
        if op == "truncate":
            del out[i:]
        elif op == "int16" and len(out) >= i + 2:
            struct.pack_into(">h", out, i, data.draw(st.sampled_from(_BOMB_INT16)))
        elif op == "int32" and len(out) >= i + 4:
            struct.pack_into(">i", out, i, data.draw(st.sampled_from(_BOMB_INT32)))
        elif op == "uvarint":
            bomb = data.draw(st.sampled_from(_BOMB_UVARINTS))
            out[i:i + 1] = bomb
        elif op == "bad_varint":
            out[i:i] = b"\xff" * data.draw(st.integers(1, 8))
        elif op == "random":
            out[i:i + 4] = data.draw(st.binary(min_size=0, max_size=8))
        elif op == "flip" and out:
            out[i] ^= 1 << data.draw(st.integers(0, 7))
        else:
            out.insert(i, data.draw(st.integers(0, 255)))
    return bytes(out)


def _cold_caches() -> None:
    """The decoders' caches emptied, so a rerun does the first run's work (allocation_peak)."""
    codec._KEY_CACHE.clear()
    _wire.UUID_CACHE.clear()
    _wire.UUID_CACHE[bytes(16)] = _wire.ZERO_UUID


def _decodes_or_refuses(key: bytes | None, value: bytes | None) -> CoordinatorRecord | UnknownRecord | None:
    """The record, or None where it was refused with a decode error naming where; bounded memory."""
    def decode() -> object:
        try:
            return decode_record(key, value, topic="fuzz", partition=0, offset=1)
        except DECODE_ERRORS as e:
            return e

    result, peak = allocation_peak(decode, MEMORY_BOUND, _cold_caches)
    if isinstance(result, DECODE_ERRORS):
        # The error names what was wrong and where.
        assert "fuzz" in str(result) or "version" in str(result), str(result)
        result = None
    assert peak < MEMORY_BOUND, f"decode took {peak} bytes for a {len(value or b'')}-byte value"
    assert result is None or isinstance(result, (CoordinatorRecord, UnknownRecord))
    return result


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SEEDS), st.data())
def test_mutated_values_decode_or_raise_a_decode_error(seed, data):
    key, value = seed
    _decodes_or_refuses(key, _mutate(data, value))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SEEDS), st.data())
def test_mutated_keys_decode_or_raise_a_decode_error(seed, data):
    key, value = seed
    _decodes_or_refuses(_mutate(data, key), value)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.binary(max_size=256))
def test_random_bytes_decode_or_raise_a_decode_error(key, value):
    _decodes_or_refuses(key, value)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([s for s in SEEDS if s[0][1] in (0, 1)]), st.data())
def test_bulk_load_offset_commit_paths_decode_or_raise(seed, data):
    # The bulk loader's own entry points (coordinator/group/bulk_replay.py).
    key, value = seed
    mkey, mvalue = _mutate(data, key), _mutate(data, value)
    if len(mkey) < 4 or mkey[0] != 0 or mkey[1] not in (0, 1):
        return  # bulk_replay sends only offset-commit keys (types 0 and 1) this way
    try:
        k = decode_offset_commit_key(mkey, offset=1)
    except DECODE_ERRORS:
        return
    if isinstance(k, OffsetCommitKey) or k.record_type == 0:
        try:
            decode_offset_commit_fields(k, mvalue, offset=1)
        except DECODE_ERRORS:
            pass


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_mutated_batches_yield_or_raise_corrupt_batch(data):
    records = [(k, v) for k, v in SEEDS[:4]]
    batch = build_batch(records, base_offset=10, timestamp_ms=1)
    mutated = _mutate(data, batch)
    check_crc = data.draw(st.booleans(), label="check_crc")
    try:
        for b in iter_batches(mutated, check_crc=check_crc):
            for r in b.records:
                try:
                    decode_record(r.key, r.value, offset=r.offset)
                except DECODE_ERRORS:
                    pass
    except CorruptBatchError:
        pass


def test_length_bombs_name_the_field_and_position():
    # Each is a valid record with one length replaced by a huge one; the error must say
    # which field and where, and come before any allocation of that size.
    cases = [
        # ConsumerGroupTargetAssignmentMemberValue: TopicPartitions count 2**31 - 2
        (7, b"\x00\x00" + b"\xff\xff\xff\xff\x07" + b"\x00", "TopicPartitions", 2),
        # GroupMetadataValue v3: members count 0x7fffffff
        (2, b"\x00\x03" + b"\x00\x00" + b"\x00\x00\x00\x01" + b"\xff\xff" * 2
         + b"\x00" * 8 + b"\x7f\xff\xff\xff", "members", 20),
        # ConsumerGroupMemberMetadataValue: ClientId length 2**31 - 2 (compact)
        (5, b"\x00\x00" + b"\x00\x00" + b"\xff\xff\xff\xff\x07" + b"\x01", "ClientId", 4),
        # OffsetCommitValue v4: 2**30 tagged fields in a 1-byte tag section
        (1, b"\x00\x04" + b"\x00" * 12 + b"\x01" + b"\x00" * 8 + b"\x80\x80\x80\x80\x04",
         "(tagged fields)", 23),
    ]
    for record_type, value, field, position in cases:
        try:
            decode_value(record_type, value, topic="t", partition=2, offset=3)
        except DECODE_ERRORS as e:
            assert e.field == field and e.position == position, (field, str(e))
            assert "partition 2, offset 3" in str(e)
        else:
            raise AssertionError(f"{field} length bomb decoded")


def test_assignment_epochs_count_bomb_is_refused_before_allocation():
    # ConsumerGroupCurrentMemberAssignmentValue whose AssignmentEpochs count is the 5-byte
    # varint of 2**31: the count was once passed straight to struct.Struct(f">{n}i").
    topic = b"\x00" * 16 + b"\x02" + b"\x00\x00\x00\x01"
    epochs_tag = b"\x01" + b"\x00" + b"\x06" + b"\x80\x80\x80\x80\x08" + b"\x00"
    value = (b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00" + b"\x00"
             + b"\x02" + topic + epochs_tag + b"\x01" + b"\x00")
    def decode() -> object:
        try:
            return decode_value(8, value)
        except DECODE_ERRORS as e:
            return e

    error, peak = allocation_peak(decode, MEMORY_BOUND, _cold_caches)
    assert isinstance(error, DECODE_ERRORS), f"decoded: {error}"
    assert error.field == "AssignedPartitions[0].AssignmentEpochs", str(error)
    assert peak < MEMORY_BOUND


def test_negative_lengths_other_than_null_and_nulls_in_non_nullable_fields():
    key = b"\x00\x02" + b"\xff\xfe"  # GroupMetadataKey.group of length -2
    try:
        decode_key(key)
    except DECODE_ERRORS as e:
        assert e.field == "group" and "negative string length -2" in e.reason
    else:
        raise AssertionError("decoded")
    null_key = b"\x00\x02" + b"\xff\xff"
    try:
        decode_key(null_key)
    except DECODE_ERRORS as e:
        assert "non-nullable string is null" in e.reason
    else:
        raise AssertionError("decoded")
    # OffsetCommitValue v3 whose metadata (non-nullable) is null.
    value = b"\x00\x03" + b"\x00" * 8 + b"\x00" * 4 + b"\xff\xff" + b"\x00" * 8
    try:
        decode_value(1, value)
    except DECODE_ERRORS as e:
        assert e.field == "metadata" and "null" in e.reason
    else:
        raise AssertionError("decoded")


def test_atheris_findings_are_corrupt_batches():
    # Inputs fuzz/atheris_records.py found escaping iter_batches: aiokafka's legacy
    # reader raising CorruptRecordException from its constructor, and SystemError for a
    # negative key length. Both must be reported as CorruptBatchError, with the position.
    import base64
    found = ["Rf8AAAAAAgAAAAARGgAAAAD/AAAAAAIAAAAAABH8",
             "AAD/AAAAAAAAAAAmAAAAagCPj4+Pj4+Pj4+Pj4+Pj4+Pj4+Pj4+Pj4+Pj4+Pj4+Pj4+Pj4+Pj4+Pj4+Pj4+P"
             "jwAAAAAAAAAAAAAAAAAAAAYAAAAAAAAAAAAAIABra2tra2tra2tra2sAAAAAAAAAAAAfXQAAACAAa2tra0s="]
    for b64 in found:
        try:
            list(iter_batches(base64.b64decode(b64), check_crc=False))
        except CorruptBatchError as e:
            assert e.position == 0 and "cannot read its records" in str(e)
        else:
            raise AssertionError("a corrupt legacy batch was read")
