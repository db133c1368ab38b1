"""The group-config record (private type 1200, records/group_config_records.py): byte round
trip, unknown tagged fields kept, bounded decoding of hostile bytes, and the offsets tools'
JSON form (ops/recordjson.py: dump and load)."""
from __future__ import annotations

import pytest

from ops.recordjson import from_dict, to_dict
from records import DECODE_ERRORS, CoordinatorRecord, decode_record, encode_record
from records.group_config_records import GroupConfigEntry, GroupConfigKey, GroupConfigValue

VALUE = GroupConfigValue((GroupConfigEntry("consumer.session.timeout.ms", "50000", ((7, b"x"),)),
                          GroupConfigEntry("streams.rack.aware.assignment.tags", "")), ((3, b"yz"),))


def test_round_trip_keeps_unknown_tags():
    key, value = encode_record(CoordinatorRecord(GroupConfigKey("g"), VALUE))
    assert key == b"\x04\xb0\x00\x01g"
    assert decode_record(key, value) == CoordinatorRecord(GroupConfigKey("g"), VALUE, 0)
    assert decode_record(key, None).value is None


@pytest.mark.parametrize("value", [
    b"\x00\x00",                        # no array
    b"\x00\x00\x00",                    # a null array
    b"\x00\x00\xff\xff\xff\xff\x0f",    # a count far beyond the bytes left
    b"\x00\x00\x02\x05ab",              # a name cut short
    b"\x00\x00\x02\x02a\x00\x00\x00",   # well-formed: one entry with a null value
])
def test_hostile_bytes_are_decode_errors(value):
    key, _ = encode_record(CoordinatorRecord(GroupConfigKey("g"), VALUE))
    try:
        decoded = decode_record(key, value)
    except DECODE_ERRORS:
        return
    assert isinstance(decoded.value, GroupConfigValue)     # the one well-formed case above


def test_offsets_tools_json_round_trip():
    assert from_dict(GroupConfigValue, to_dict(VALUE)) == VALUE
    assert from_dict(GroupConfigKey, to_dict(GroupConfigKey("g"))) == GroupConfigKey("g")
