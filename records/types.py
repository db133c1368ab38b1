"""Record types, the record envelope and the codec's errors.

The ids and names are Kafka's `CoordinatorRecordType` (generated from the
`apiKey` of each "coordinator-key" schema since KAFKA-18301, Kafka 4.0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class RecordType(IntEnum):
    """The record types a Kafka 4.3 group coordinator writes or reads, and Kafka 4.4's
    streams group types (KIP-1071, records/streams_records.py).

    Share types (10-15) and the removed ids 9 and 18 (KIP-1101) are not members: they
    decode to `UnknownRecord`, as KIP-915 asks of a coordinator that meets a type it does
    not know.
    """

    LEGACY_OFFSET_COMMIT = 0
    OFFSET_COMMIT = 1
    GROUP_METADATA = 2
    CONSUMER_GROUP_METADATA = 3
    CONSUMER_GROUP_PARTITION_METADATA = 4
    CONSUMER_GROUP_MEMBER_METADATA = 5
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
    CONSUMER_GROUP_REGULAR_EXPRESSION = 16
    STREAMS_GROUP_METADATA = 17
    STREAMS_GROUP_MEMBER_METADATA = 19
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
    STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
    STREAMS_GROUP_TOPOLOGY = 23


def _type_label(record_type: int) -> str:
    try:
        return f"{record_type} ({RecordType(record_type).name})"
    except ValueError:
        return f"{record_type} (unknown)"


def _where(topic: str | None, partition: int | None, offset: int | None) -> str:
    parts = []
    if topic is not None:
        parts.append(f"topic {topic}")
    if partition is not None:
        parts.append(f"partition {partition}")
    if offset is not None:
        parts.append(f"offset {offset}")
    return f" at {', '.join(parts)}" if parts else ""


class RecordDecodeError(ValueError):
    """Bytes that are not a valid record of the type they claim to be.

    `position` is the byte offset inside the key (when `part == "key"`) or the
    value (including its 2-byte version prefix) where the bad field starts.
    """

    def __init__(self, record_type: int | None, schema: str, field: str, position: int,
                 reason: str, *, part: str = "value", version: int | None = None,
                 topic: str | None = None, partition: int | None = None,
                 offset: int | None = None) -> None:
        self.record_type = record_type
        self.schema = schema
        self.field = field
        self.position = position
        self.reason = reason
        self.part = part
        self.version = version
        self.topic, self.partition, self.offset = topic, partition, offset
        rtype = "?" if record_type is None else _type_label(record_type)
        ver = "" if version is None else f" version {version}"
        super().__init__(
            f"malformed {schema}{ver} (record type {rtype}){_where(topic, partition, offset)}: "
            f"field {field!r} at {part} byte {position}: {reason}")

    def located(self, topic: str | None, partition: int | None,
                offset: int | None) -> RecordDecodeError:
        """The same error, naming where in the log the record was."""
        return RecordDecodeError(self.record_type, self.schema, self.field, self.position,
                                 self.reason, part=self.part, version=self.version,
                                 topic=topic, partition=partition, offset=offset)


class UnknownRecordVersionError(ValueError):
    """A known record type with a value version outside its valid range.

    Kafka (`UnknownRecordVersionException`) fails the partition load on this,
    unlike an unknown record *type*, which it skips.
    """

    def __init__(self, record_type: int, version: int, *, topic: str | None = None,
                 partition: int | None = None, offset: int | None = None) -> None:
        self.record_type, self.version = record_type, version
        self.topic, self.partition, self.offset = topic, partition, offset
        super().__init__(
            f"unknown value version {version} for record type {_type_label(record_type)}"
            f"{_where(topic, partition, offset)}")


class UnknownRecordTypeError(ValueError):
    """`decode_key`/`decode_value` were given a type this codec does not know.

    `decode_record` never raises this: it returns an `UnknownRecord` instead.
    """

    def __init__(self, record_type: int) -> None:
        self.record_type = record_type
        super().__init__(f"unknown record type {record_type}")


class RecordEncodeError(ValueError):
    """A key or value that cannot be written at the requested version."""


def _no_codec(value: Any) -> int:
    raise RecordEncodeError("records.codec is not loaded: it registers the value versions Kafka writes")


# The value version Kafka 4.3 writes for a value: codec.py, which knows every value type,
# registers it (`register_write_version`), so this bottom module imports nothing of records.
_write_version: Callable[[Any], int] = _no_codec


def register_write_version(fn: Callable[[Any], int]) -> None:
    global _write_version
    _write_version = fn


@dataclass(slots=True, init=False)
class CoordinatorRecord:
    """One `__consumer_offsets` record: a key and a value; value None is a tombstone.

    `value_version` defaults to the version Kafka 4.3 writes for the value
    (`latest_value_version`). For a tombstone it is 0 and means nothing.
    """

    key: Any
    value: Any = None
    value_version: int | None = None

    # Written out, not the dataclass's __init__ and a __post_init__: a durable OffsetCommit
    # builds one record per partition, and the second frame per record was 0.9 % of a
    # 10-partition commit (docs/measurements/cpu-per-commit.md).
    def __init__(self, key: Any, value: Any = None, value_version: int | None = None) -> None:
        self.key = key
        self.value = value
        if value_version is None:
            value_version = 0 if value is None else _write_version(value)
        self.value_version = value_version

    @property
    def record_type(self) -> int:
        return self.key.record_type


@dataclass(frozen=True, slots=True)
class UnknownRecord:
    """A record whose type this codec does not know (KIP-915: skip, do not fail).

    `key` is the whole key including the int16 type prefix; `value` the whole
    value including its version prefix, or None for a tombstone.
    """

    record_type: int
    key: bytes
    value: bytes | None
