"""The streams group's `__consumer_offsets` records (types 17, 19-23), under the names the
streams group core uses.

Their formats live in records/ with every other record (records/streams_records.py: the
classes generated from Kafka 4.4's jar, the record type on keys and values, bounded decoding);
a load decodes them with the rest (`records.decode_record`), so a value that does not parse
fails the load as in Kafka. `encode`/`decode` here are the codec's, for the tests' logs.
"""
from __future__ import annotations

from typing import Any

from records import CoordinatorRecord, decode_record, encode_record
from records.streams_records import (
    KEY_CLASSES,
    TYPES,
    CurrentTaskIds,
    Endpoint,
    KeyValue,
    LastAssignmentConfig,
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
    TargetTaskIds,
    TopologyCopartitionGroup,
    TopologySubtopology,
    TopologyTopicConfig,
    TopologyTopicInfo,
)

__all__ = [
    "KEY_CLASSES", "TYPES", "CurrentTaskIds", "Endpoint", "KeyValue", "LastAssignmentConfig",
    "StreamsGroupCurrentMemberAssignmentKey", "StreamsGroupCurrentMemberAssignmentValue",
    "StreamsGroupMemberMetadataKey", "StreamsGroupMemberMetadataValue", "StreamsGroupMetadataKey",
    "StreamsGroupMetadataValue", "StreamsGroupTargetAssignmentMemberKey",
    "StreamsGroupTargetAssignmentMemberValue", "StreamsGroupTargetAssignmentMetadataKey",
    "StreamsGroupTargetAssignmentMetadataValue", "StreamsGroupTopologyKey", "StreamsGroupTopologyValue",
    "TargetTaskIds", "TopologyCopartitionGroup", "TopologySubtopology", "TopologyTopicConfig",
    "TopologyTopicInfo", "record", "encode", "decode",
]


def record(key: Any, value: Any) -> CoordinatorRecord:
    """A streams record (value None: its tombstone); every value is written at version 0."""
    return CoordinatorRecord(key, value, value_version=0)


def encode(rec: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    """(key bytes, value bytes or None for a tombstone), framed as kafka-coordinator.md §2.1."""
    return encode_record(rec)


def decode(key: bytes, value: bytes | None) -> CoordinatorRecord:
    """The record; RecordDecodeError for bytes that do not parse, UnknownRecordVersionError for
    a value version other than 0 (both fail a load, as Kafka's do)."""
    rec = decode_record(key, value)
    assert isinstance(rec, CoordinatorRecord), "streams types are known to records/"
    return rec
