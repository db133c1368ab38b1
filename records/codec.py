"""Encode and decode `__consumer_offsets` keys and values (framing: §2.1).

    key   = int16 record type || key struct, classic encoding, version 0
    value = int16 version     || value struct at that version; None = tombstone

`decode_record` is the replay hot path: decoded keys are cached by their
bytes (keys are immutable and repeat heavily in an offsets log), and offset
commit keys/values have hand-unrolled fast paths.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any

from records import _assignment as asg
from records import _classic as cl
from records import _consumer as cg
from records import connect_records as cr
from records import group_config_records as gcr
from records import streams_records as sr
from records._trailing import TRAILING_BYTES
from records._wire import (
    LOW_LEVEL,
    MAX_STRING,
    UUID_CACHE,
    FieldError,
    TrailingBytes,
    pack_h,
    pack_i,
    reason_of,
    string,
    unpack_h,
    unpack_i,
    w_string,
)
from records.schemas import (
    ZERO_UUID,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    LegacyOffsetCommitKey,
    LegacyOffsetCommitValue,
    OffsetCommitKey,
    OffsetCommitValue,
    _EncodedKey,
)
from records.types import (
    CoordinatorRecord,
    RecordDecodeError,
    RecordEncodeError,
    UnknownRecord,
    UnknownRecordTypeError,
    UnknownRecordVersionError,
    register_write_version,
)

# --- keys ----------------------------------------------------------------------
# (key class, Kafka field names, layout: s = string, i = int32)
_KEY_LAYOUTS: dict[int, tuple[type, tuple[str, ...], str]] = {
    0: (LegacyOffsetCommitKey, ("group", "topic", "partition"), "ssi"),
    1: (OffsetCommitKey, ("group", "topic", "partition"), "ssi"),
    2: (GroupMetadataKey, ("group",), "s"),
    3: (ConsumerGroupMetadataKey, ("GroupId",), "s"),
    4: (ConsumerGroupPartitionMetadataKey, ("GroupId",), "s"),
    5: (ConsumerGroupMemberMetadataKey, ("GroupId", "MemberId"), "ss"),
    6: (ConsumerGroupTargetAssignmentMetadataKey, ("GroupId",), "s"),
    7: (ConsumerGroupTargetAssignmentMemberKey, ("GroupId", "MemberId"), "ss"),
    8: (ConsumerGroupCurrentMemberAssignmentKey, ("GroupId", "MemberId"), "ss"),
    16: (ConsumerGroupRegularExpressionKey, ("GroupId", "RegularExpression"), "ss"),
    **sr.KEY_LAYOUTS,   # the streams group (KIP-1071): 17, 19-23 as Kafka 4.4 writes them
    **cr.KEY_LAYOUTS,   # kcoord's connect group (docs/design/connect-groups-spec.md): private types 1000-1004
    **gcr.KEY_LAYOUTS,  # kcoord's per-group configuration (docs/user/group-configs.md): private type 1200
}
_KEY_ATTRS = {cls: (rtype, tuple(f.name for f in dataclasses.fields(cls)), layout)
              for rtype, (cls, _, layout) in _KEY_LAYOUTS.items()}


def _positional(key_cls: Any) -> Callable[..., Any]:
    """`key_cls` built from its fields in order: the classes generated from Kafka's jar
    (streams_records.py) take keywords only."""
    fields = dataclasses.fields(key_cls)
    if not fields or not fields[0].kw_only:
        return key_cls
    names = tuple(f.name for f in fields)
    return lambda *values: key_cls(**dict(zip(names, values)))


def _key_decoder(key_cls: type, names: tuple[str, ...], layout: str) -> Callable[[bytes], Any]:
    """A decoder unrolled for one key layout (keys are classic encoding, version 0)."""
    cls = _positional(key_cls)
    if layout == "s":
        def decode(b: bytes) -> Any:
            pos = 2
            try:
                a, pos = string(b, pos)
            except LOW_LEVEL as e:
                raise FieldError(names[0], pos, reason_of(e, b)) from None
            cl.check_end(b, pos)
            return cls(a)
    elif layout == "ss":
        def decode(b: bytes) -> Any:
            f, pos = names[0], 2
            try:
                a, pos = string(b, pos)
                f = names[1]
                c, pos = string(b, pos)
            except LOW_LEVEL as e:
                raise FieldError(f, pos, reason_of(e, b)) from None
            cl.check_end(b, pos)
            return cls(a, c)
    else:
        assert layout == "ssi"

        def decode(b: bytes) -> Any:
            f, pos = names[0], 2
            try:
                a, pos = string(b, pos)
                f = names[1]
                c, pos = string(b, pos)
                f = names[2]
                p = unpack_i(b, pos)[0]
                pos += 4
            except LOW_LEVEL as e:
                raise FieldError(f, pos, reason_of(e, b)) from None
            cl.check_end(b, pos)
            return cls(a, c, p)
    return decode


_KEY_DECODERS = {rtype: _key_decoder(*layout) for rtype, layout in _KEY_LAYOUTS.items()}


_new = object.__new__
_set_group = OffsetCommitKey.group.__set__  # type: ignore[attr-defined,misc]  # the slot descriptors
_set_topic = OffsetCommitKey.topic.__set__  # type: ignore[attr-defined,misc]
_set_partition = OffsetCommitKey.partition.__set__  # type: ignore[attr-defined,misc]


def _offset_commit_key_fast(b: bytes) -> OffsetCommitKey | None:
    """Well-formed OffsetCommitKey, or None to let the checked path report the error."""
    n = len(b)
    if n < 10:
        return None
    g = (b[2] << 8) | b[3]
    e1 = 4 + g
    if g >= 0x8000 or e1 + 6 > n:
        return None
    t = (b[e1] << 8) | b[e1 + 1]
    e2 = e1 + 2 + t
    if t >= 0x8000 or e2 + 4 != n:
        return None
    try:
        group = b[4:e1].decode()
        topic = b[e1 + 2:e2].decode()
    except UnicodeDecodeError:
        return None
    # Frozen-dataclass __init__ goes through object.__setattr__ per field;
    # the slot descriptors do the same job at half the cost.
    k = _new(OffsetCommitKey)
    _set_group(k, group)
    _set_topic(k, topic)
    _set_partition(k, unpack_i(b, e2)[0])
    return k


def decode_key(data: bytes, *, topic: str | None = None, partition: int | None = None,
               offset: int | None = None) -> Any:
    """The key dataclass; UnknownRecordTypeError for a type this codec does not know.
    Bytes after the key struct are ignored, counted and logged (records/_trailing.py)."""
    return _decode_key(data, topic, partition, offset)[0]


def _decode_key(data: bytes, topic: str | None, partition: int | None,
                offset: int | None) -> tuple[Any, bool]:
    """(key, whether it had trailing bytes)."""
    b = data if type(data) is bytes else bytes(data or b"")
    if len(b) < 2:
        raise RecordDecodeError(None, "record key", "type", 0, f"key is {len(b)} bytes; "
                                "needs at least the 2-byte record type", part="key",
                                topic=topic, partition=partition, offset=offset)
    rtype = unpack_h(b, 0)[0]
    if rtype not in _KEY_LAYOUTS:
        raise UnknownRecordTypeError(rtype)
    decoder = _KEY_DECODERS[rtype]
    try:
        if rtype == 1:
            key = _offset_commit_key_fast(b)
            if key is not None:
                return key, False
        return decoder(b), False
    except TrailingBytes as e:
        # Kafka's key readers stop at the end of the struct: so does this one.
        key = decoder(b[:e.end])
        TRAILING_BYTES.note(_KEY_LAYOUTS[rtype][0].__name__, "key", len(b) - e.end, topic,
                            partition, offset)
        return key, True
    except FieldError as e:
        raise RecordDecodeError(rtype, _KEY_LAYOUTS[rtype][0].__name__, e.field, e.position,
                                e.reason, part="key", topic=topic, partition=partition,
                                offset=offset) from None


# The offset commit keys a shard writes repeat on every commit of the same partitions: one
# shared key per (group, topic, partition), its bytes in its `encoded` slot
# (schemas._EncodedKey), so a commit neither builds nor encodes its keys again. Kept by
# (group, topic), then by partition: a commit looks its topic up once and each partition by
# its int, with no tuple built and hashed per partition. Group and topic names come from
# clients, so the memo is bounded twice: by keys (`_keys_kept`, every key of every topic;
# all cleared when full, like the decode cache below) and by size (a key longer than
# OFFSET_COMMIT_KEYS_MAX_BYTES is never kept), which caps it at a few megabytes whatever the
# names. Clearing the dict from outside (tests) leaves the count above the keys held: the
# bound still holds.
OFFSET_COMMIT_KEYS: dict[tuple[str, str], dict[int, OffsetCommitKey]] = {}
OFFSET_COMMIT_KEYS_MAX = 8192
OFFSET_COMMIT_KEYS_MAX_BYTES = 256
_keys_kept = 0
_set_encoded = _EncodedKey.encoded.__set__  # type: ignore[misc,attr-defined]  # the slot descriptor


def offset_commit_key(group: str, topic: str, partition: int) -> OffsetCommitKey:
    """The shared OffsetCommitKey of (group, topic, partition) with its bytes in `encoded`:
    from the memo, else built, encoded and kept if it is small enough."""
    global _keys_kept
    kept = OFFSET_COMMIT_KEYS.get((group, topic))
    if kept is not None:
        key = kept.get(partition)
        if key is not None:
            return key
    key = OffsetCommitKey(group, topic, partition)
    encoded = _encode_key(key)
    _set_encoded(key, encoded)
    if len(encoded) <= OFFSET_COMMIT_KEYS_MAX_BYTES:
        if _keys_kept >= OFFSET_COMMIT_KEYS_MAX:
            OFFSET_COMMIT_KEYS.clear()
            _keys_kept = 0
            kept = None
        if kept is None:
            kept = OFFSET_COMMIT_KEYS[(group, topic)] = {}
        kept[partition] = key
        _keys_kept += 1
    return key


def offset_commit_keys_kept() -> int:
    """The keys the memo holds (its bound is OFFSET_COMMIT_KEYS_MAX)."""
    return sum(map(len, OFFSET_COMMIT_KEYS.values()))


def encode_key(key: Any) -> bytes:
    if key.__class__ is OffsetCommitKey:
        try:
            return key.encoded
        except AttributeError:     # a key not from offset_commit_key: its shared twin's bytes
            return offset_commit_key(key.group, key.topic, key.partition).encoded
    return _encode_key(key)


def _encode_key(key: Any) -> bytes:
    try:
        rtype, attrs, layout = _KEY_ATTRS[type(key)]
    except KeyError:
        raise RecordEncodeError(f"{type(key).__name__} is not a record key") from None
    try:
        if rtype == 1:
            group, topic = key.group.encode(), key.topic.encode()
            if len(group) <= MAX_STRING and len(topic) <= MAX_STRING:
                return b"".join((b"\x00\x01", pack_h(len(group)), group, pack_h(len(topic)),
                                 topic, pack_i(key.partition)))
        out = bytearray(pack_h(rtype))
        for attr, kind in zip(attrs, layout):
            v = getattr(key, attr)
            if kind == "s":
                w_string(out, v)
            else:
                out += struct.pack(">i", v)
        return bytes(out)
    except (struct.error, ValueError, TypeError, AttributeError) as e:
        raise RecordEncodeError(f"cannot encode {type(key).__name__}: {e}") from e


# --- values --------------------------------------------------------------------

_VALUE_DECODERS: dict[int, dict[int, Callable[[bytes], Any]]] = {
    0: {0: cl.decode_legacy_offset_commit_v0},
    1: {0: cl.decode_offset_commit_v0, 1: cl.decode_offset_commit_v1,
        2: cl.decode_offset_commit_v2, 3: cl.decode_offset_commit_v3,
        4: cl.decode_offset_commit_v4},
    2: {0: cl.decode_group_metadata_v0, 1: cl.decode_group_metadata_v1,
        2: cl.decode_group_metadata_v2, 3: cl.decode_group_metadata_v3,
        4: cl.decode_group_metadata_v4},
    3: {0: cg.decode_consumer_group_metadata},
    4: {0: cg.decode_consumer_group_partition_metadata},
    5: {0: cg.decode_consumer_group_member_metadata},
    6: {0: cg.decode_target_assignment_metadata},
    7: {0: asg.decode_target_assignment_member},
    8: {0: asg.decode_current_member_assignment},
    16: {0: cg.decode_regular_expression},
    **sr.VALUE_DECODERS,
    **cr.VALUE_DECODERS,
    **gcr.VALUE_DECODERS,
}

_VALUE_ENCODERS: dict[type, tuple[Callable[[Any, int], bytes], range]] = {
    LegacyOffsetCommitValue: (cl.encode_legacy_offset_commit, range(0, 1)),
    OffsetCommitValue: (cl.encode_offset_commit, range(0, 5)),
    GroupMetadataValue: (cl.encode_group_metadata, range(0, 5)),
    ConsumerGroupMetadataValue: (cg.encode_consumer_group_metadata, range(0, 1)),
    ConsumerGroupPartitionMetadataValue: (cg.encode_consumer_group_partition_metadata,
                                          range(0, 1)),
    ConsumerGroupMemberMetadataValue: (cg.encode_consumer_group_member_metadata, range(0, 1)),
    ConsumerGroupTargetAssignmentMetadataValue: (cg.encode_target_assignment_metadata,
                                                 range(0, 1)),
    ConsumerGroupTargetAssignmentMemberValue: (asg.encode_target_assignment_member, range(0, 1)),
    ConsumerGroupCurrentMemberAssignmentValue: (asg.encode_current_member_assignment,
                                                range(0, 1)),
    ConsumerGroupRegularExpressionValue: (cg.encode_regular_expression, range(0, 1)),
    **sr.VALUE_ENCODERS,
    **cr.VALUE_ENCODERS,
    **gcr.VALUE_ENCODERS,
}

# GroupMetadataManager / GroupCoordinatorRecordHelpers: group metadata is written
# at GROUP_METADATA_VALUE_VERSION = 3; offsets at 4, or 1 when the commit
# carries an expire timestamp (the only version with that field).
# Version 4 with empty metadata: version, offset, leader epoch, the metadata's compact length
# (1: ""), commit timestamp; then the tagged fields: none (a count of 0), or the topic id (a
# count of 1, tag 0, size 16, the id).
_OFFSET_COMMIT_V4_HEAD = struct.Struct(">hqiBq")
# The tagged fields by the topic id's int (a UUID hashes in Python, an int in C). The ids are
# the metadata image's (a commit names a topic the image knows), bounded all the same.
_OFFSET_COMMIT_TAGS: dict[int, bytes] = {0: b"\x00"}
_OFFSET_COMMIT_TAGS_MAX = 4096


def _offset_commit_tags(topic_id: int) -> bytes:
    tags = b"\x01\x00\x10" + topic_id.to_bytes(16, "big") if topic_id else b"\x00"
    if len(_OFFSET_COMMIT_TAGS) >= _OFFSET_COMMIT_TAGS_MAX:
        _OFFSET_COMMIT_TAGS.clear()
    _OFFSET_COMMIT_TAGS[topic_id] = tags
    return tags


def latest_value_version(value: Any) -> int:
    """The value version Kafka 4.3 writes for this value."""
    t = type(value)
    if t is OffsetCommitValue:
        return 4 if value.expire_timestamp == -1 else 1
    if t is GroupMetadataValue:
        return 3
    if t in _VALUE_ENCODERS:
        return 0
    raise RecordEncodeError(f"{t.__name__} is not a record value")


register_write_version(latest_value_version)


def encode_value(value: Any, version: int | None = None) -> bytes | None:
    """Value bytes (version prefix included); None for a tombstone.

    Fields the chosen version lacks are dropped, as Kafka does for its
    "ignorable" fields (all such fields in these schemas are ignorable).
    """
    if value is None:
        return None
    t = type(value)
    try:
        if t is OffsetCommitValue and (version == 4 or version is None) \
                and value.expire_timestamp == -1 and not value.metadata \
                and not value.unknown_tagged_fields:
            # Fast path: what the coordinator writes for nearly every commit, in one pack.
            # UUID.bytes is a Python property over .int: the int's halves are cheaper.
            # The head in one pack, the tagged fields (the topic id's, the same for every
            # commit of the topic) from a memo by the id.
            tid = value.topic_id.int
            tags = _OFFSET_COMMIT_TAGS.get(tid)
            if tags is None:
                tags = _offset_commit_tags(tid)
            return _OFFSET_COMMIT_V4_HEAD.pack(4, value.offset, value.leader_epoch, 1, value.commit_timestamp) + tags
        entry = _VALUE_ENCODERS.get(t)
        if entry is None:
            raise RecordEncodeError(f"{t.__name__} is not a record value")
        encoder, versions = entry
        if version is None:
            version = latest_value_version(value)
        if version not in versions:
            raise RecordEncodeError(f"{t.__name__} has no version {version} "
                                    f"(valid: {versions.start}-{versions.stop - 1})")
        return encoder(value, version)
    except RecordEncodeError:
        raise
    except (struct.error, ValueError, TypeError, AttributeError, OverflowError) as e:
        shown = latest_value_version(value) if version is None else version
        raise RecordEncodeError(f"cannot encode {t.__name__} version {shown}: {e}") from e


def _value_schema(rtype: int) -> str:
    for cls in _VALUE_ENCODERS:
        if cls.record_type == rtype:  # type: ignore[attr-defined]  # every value class has one
            return cls.__name__
    return "value"


def decode_value(record_type: int, data: bytes | None, *, topic: str | None = None,
                 partition: int | None = None, offset: int | None = None) -> tuple[Any, int]:
    """(value, version) for a value of a known record type; (None, 0) for a tombstone."""
    if data is None:
        return None, 0
    decoders = _VALUE_DECODERS.get(record_type)
    if decoders is None:
        raise UnknownRecordTypeError(record_type)
    b = data if type(data) is bytes else bytes(data)
    if len(b) < 2:
        raise RecordDecodeError(record_type, _value_schema(record_type), "version", 0,
                                f"value is {len(b)} bytes; needs at least the 2-byte version",
                                topic=topic, partition=partition, offset=offset)
    version = unpack_h(b, 0)[0]
    decoder = decoders.get(version)
    if decoder is None:
        raise UnknownRecordVersionError(record_type, version, topic=topic,
                                        partition=partition, offset=offset)
    try:
        return decoder(b), version
    except TrailingBytes as e:
        # Kafka's value readers stop at the end of the struct and load the record: decode
        # the struct alone (it ended at e.end), count it and warn.
        value = decoder(b[:e.end])
        TRAILING_BYTES.note(_value_schema(record_type), "value", len(b) - e.end, topic,
                            partition, offset)
        return value, version
    except FieldError as e:
        raise RecordDecodeError(record_type, _value_schema(record_type), e.field, e.position,
                                e.reason, version=version, topic=topic, partition=partition,
                                offset=offset) from None


# Small enough to stay in CPU cache (a big dict makes every miss slower, and a
# freshly compacted log is mostly misses), big enough for the hot partitions of
# an active log. Measured with bench/bench_records.py.
_KEY_CACHE: dict[bytes, Any] = {}
_KEY_CACHE_MAX = 8192


def decode_record(key: bytes, value: bytes | None, *, topic: str | None = None,
                  partition: int | None = None,
                  offset: int | None = None) -> CoordinatorRecord | UnknownRecord:
    """Decode one record. Unknown record types give an UnknownRecord (KIP-915)."""
    if type(key) is not bytes:
        if key is None:
            raise RecordDecodeError(None, "record key", "key", 0, "record has no key",
                                    part="key", topic=topic, partition=partition,
                                    offset=offset)
        key = bytes(key)
    k = _KEY_CACHE.get(key)
    if k is None:
        if len(key) < 2:
            decode_key(key, topic=topic, partition=partition, offset=offset)  # raises
        rtype = unpack_h(key, 0)[0]
        trailing = False
        if rtype == 1:
            k = _offset_commit_key_fast(key)
        if k is None:
            decoder = _KEY_DECODERS.get(rtype)
            if decoder is None:
                return UnknownRecord(rtype, key, None if value is None else bytes(value))
            try:
                k = decoder(key)
            except FieldError:
                # Raises, or returns a key that had trailing bytes: not cached, so that
                # every record carrying it is counted.
                k, trailing = _decode_key(key, topic, partition, offset)
        if not trailing:
            if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
                _KEY_CACHE.clear()
            _KEY_CACHE[key] = k
    if value is None:
        return CoordinatorRecord(k, None, 0)
    rtype = k.record_type
    if rtype == 1 and type(value) is bytes and len(value) >= 2 and value[0] == 0 \
            and value[1] == 4:
        try:
            return CoordinatorRecord(k, cl.decode_offset_commit_v4(value), 4)
        except FieldError:
            pass  # decode_value below re-raises it (or ignores trailing bytes) with context
    v, version = decode_value(rtype, value, topic=topic, partition=partition, offset=offset)
    return CoordinatorRecord(k, v, version)


def encode_record(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    """(key bytes, value bytes or None) for a record built in code."""
    key, value = record.key, record.value
    if value is not None and type(value).record_type != key.record_type:
        raise RecordEncodeError(f"{type(key).__name__} (type {key.record_type}) cannot carry "
                                f"a {type(value).__name__}")
    return encode_key(key), encode_value(value, record.value_version)


_NO_TOPIC_ID = object()
# The head and the tagged fields in one pack: no tags (a count of 0), or the topic id's
# (count, tag, size and the 16 bytes of the id; `_offset_commit_tags` makes only these two).
_ID_TAGS_LENGTH = 19
_OFFSET_COMMIT_V4_NO_TAGS = struct.Struct(">hqiBq1s").pack
_OFFSET_COMMIT_V4_WITH_ID = struct.Struct(f">hqiBq{_ID_TAGS_LENGTH}s").pack


class EncodedRecords(list):
    """A durable OffsetCommit's records (group/offsets/ops.py): every one an offset commit
    with a value. When their bytes were made as they were built (`encoded`: the (key bytes,
    value bytes) of each, in order, as `encode_records` gives them), `encode_records` returns
    those as they are (ops.py packs each value where its fields are at hand). Its builder
    sets `encoded` once the list is complete and changes neither after; None: not made (then
    the records are encoded as any list's). A copy of it (`list(...)`, `[*records]`) is a
    plain list, encoded in full."""
    __slots__ = ("encoded",)
    encoded: list[tuple[bytes, bytes | None]] | None


def offset_commit_v4_packer(topic_id: Any) -> tuple[Callable[..., bytes], bytes]:
    """(pack, tags) of a version 4 OffsetCommitValue of the topic id ``topic_id`` (a UUID,
    ZERO_UUID for none) with empty metadata and no unknown tagged fields: its bytes are
    ``pack(4, offset, leader_epoch, 1, commit_timestamp, tags)``, as `encode_value` gives them
    (`struct.error` for a field out of its range, where `encode_value` raises)."""
    tid = topic_id.int
    tags = _OFFSET_COMMIT_TAGS.get(tid) or _offset_commit_tags(tid)
    return (_OFFSET_COMMIT_V4_WITH_ID if len(tags) == _ID_TAGS_LENGTH else _OFFSET_COMMIT_V4_NO_TAGS), tags


def encode_records(records: Any) -> list[tuple[bytes, bytes | None]]:
    """(key bytes, value bytes or None) of each record, as `encode_key` and `encode_value` at
    the record's version give them, in one loop: a commit's offset record (a key from
    `offset_commit_key`, version 4, empty metadata, no unknown tags) is encoded here without
    a call, every other record through those two. Meant for the runtime's `serialize` of a
    shard's fresh result: one call per record less there, -1.7 % of a durable 10-partition
    OffsetCommit (docs/measurements/cpu-per-commit.md). `EncodedRecords` whose bytes were
    made are not encoded again."""
    if records.__class__ is EncodedRecords and records.encoded is not None:
        return records.encoded
    out: list[tuple[bytes, bytes | None]] = []
    append = out.append
    tags_of = _OFFSET_COMMIT_TAGS
    # A commit's records are runs of one topic, whose id is the same UUID object: its tags
    # are looked up once per run (a UUID is immutable, so the same object is the same id),
    # and packed with the head in one call (no second bytes object and concatenation).
    last_id: Any = _NO_TOPIC_ID
    tags = b""
    pack: Any = None
    for r in records:
        key, value = r.key, r.value
        # Version 4 has no expire time: its bytes are the same whatever the value's (the
        # generic encoder drops the field), so it is not checked here; a null metadata goes to
        # the generic encoder (its bytes, or its refusal when an expire time is set); nor is the key's class:
        # a key without the shared key's bytes is encoded by `encode_key`, as on the other path.
        if value.__class__ is OffsetCommitValue and r.value_version == 4 and value.metadata == "" \
                and not value.unknown_tagged_fields:
            try:
                encoded = key.encoded
            except AttributeError:
                encoded = encode_key(key)
            topic_id = value.topic_id
            if topic_id is not last_id:
                tid = topic_id.int
                tags = tags_of.get(tid) or _offset_commit_tags(tid)
                pack = _OFFSET_COMMIT_V4_WITH_ID if len(tags) == _ID_TAGS_LENGTH else _OFFSET_COMMIT_V4_NO_TAGS
                last_id = topic_id
            try:
                append((encoded, pack(4, value.offset, value.leader_epoch, 1, value.commit_timestamp, tags)))
            except struct.error:
                append((encoded, encode_value(value, 4)))   # raises the codec's RecordEncodeError
        else:
            append((encode_key(key), encode_value(value, r.value_version)))
    return out


__all__ = ["encode_key", "encode_value", "encode_record", "encode_records", "EncodedRecords",
           "offset_commit_v4_packer", "decode_key",
           "decode_value", "decode_record", "latest_value_version", "decode_offset_commit_fields",
           "decode_offset_commit_key"]


def decode_offset_commit_fields(key: Any, value: bytes | None, *, topic: str | None = None,
                                partition: int | None = None, offset: int | None = None) -> tuple | None:
    """Bulk-load fast path for offset commits (record types 0 and 1): the fields replay
    needs, `(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp, topic_id)`,
    without building a value object; None for a tombstone. Errors are `decode_record`'s."""
    if value is None:
        return None
    if type(value) is not bytes:
        value = bytes(value)
    n = len(value)
    if (n == 24 or n == 42) and value[0] == 0 and value[1] == 4 and value[14] == 1:
        # What Kafka writes for nearly every commit: v4, empty metadata, maybe a topic id.
        o, le, _, ts, ntags = cl._V4_EMPTY_METADATA.unpack_from(value, 2)
        if ntags == 0 and n == 24:
            return (o, le, "", ts, -1, ZERO_UUID)
        if ntags == 1 and n == 42 and value[24] == 0 and value[25] == 16:
            tid = UUID_CACHE.get(value[26:42])
            if tid is not None:
                return (o, le, "", ts, -1, tid)
    v, _ = decode_value(key.record_type, value, topic=topic, partition=partition, offset=offset)
    if key.record_type == 0:
        return (v.offset, -1, v.metadata or "", v.commit_timestamp, -1, None)
    return (v.offset, v.leader_epoch, v.metadata or "", v.commit_timestamp, v.expire_timestamp, v.topic_id)


def decode_offset_commit_key(key: bytes, *, topic: str | None = None, partition: int | None = None,
                             offset: int | None = None):
    """The key of an offset commit (types 0 and 1) through the key cache."""
    k = _KEY_CACHE.get(key)
    if k is None:
        k = _offset_commit_key_fast(key) if len(key) >= 2 and key[1] == 1 else None
        trailing = False
        if k is None:
            k, trailing = _decode_key(key, topic, partition, offset)
        if not trailing:
            if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
                _KEY_CACHE.clear()
            _KEY_CACHE[key] = k
    return k
