"""Value codecs of the KIP-848 consumer-group records (types 3-6 and 16).

All are version 0 and flexible from version 0. Two tagged fields have the
"default null" subtlety of Kafka's generator (kafka-coordinator.md §2.3): the
schema says `"default": null`, but the generated default is the *empty*
struct/array, so:
- null is written explicitly: tag, size 1, presence/length varint 0 (`00 01 00`);
- the empty struct/array is the default and is omitted;
- an absent tag reads as the empty struct/array.
A present nullable struct is: tag, size (= struct size + 1), varint 1, struct.
"""

from __future__ import annotations

from typing import Any

from records._classic import check_end
from records._client_assignor import (
    decode_client_assignors,
    decode_target_metadata_tag,
    encode_client_assignors,
    encode_target_metadata_tags,
)
from records._wire import (
    LOW_LEVEL,
    FieldError,
    array_len,
    cbytes,
    cnstring,
    cstring,
    expect_end,
    nested,
    pack_i,
    pack_q,
    reason_of,
    string_array,
    tag_count,
    tagged_field,
    unknown_tags,
    unpack_i,
    unpack_q,
    uuid_,
    uvarint,
    w_array_len,
    w_cbytes,
    w_cnstring,
    w_cstring,
    w_string_array,
    w_tags,
)
from records.schemas import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    PartitionMetadata,
    TopicMetadata,
)


def tag_loop(b: bytes, pos: int, on_known) -> tuple[tuple[tuple[int, bytes], ...], int]:
    """Read a tag section; `on_known(tag, start, end)` returns True if it consumed the tag,
    any other tag is kept raw (types 3 and 5-8: Kafka's tag 0, kcoord's tags >= 1000)."""
    if b[pos] == 0:
        return (), pos + 1
    n, pos = tag_count(b, pos)
    unknown = []
    for _ in range(n):
        tag, start, end = tagged_field(b, pos)
        if not on_known(tag, start, end):
            unknown.append((tag, b[start:end]))
        pos = end
    return tuple(unknown), pos


# --- type 3 -------------------------------------------------------------------

def decode_consumer_group_metadata(b: bytes) -> ConsumerGroupMetadataValue:
    f, pos = "Epoch", 2
    found = {}

    def known(tag: int, start: int, end: int) -> bool:
        if tag == 0:
            expect_end(start + 8, end, "tagged field MetadataHash")
            found["hash"] = unpack_q(b, start)[0]
            return True
        return False
    try:
        epoch = unpack_i(b, pos)[0]
        pos += 4
        f = "(tagged fields)"
        tags, pos = tag_loop(b, pos, known)
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    check_end(b, pos)
    return ConsumerGroupMetadataValue(epoch, found.get("hash", 0), tags)


def encode_consumer_group_metadata(v: ConsumerGroupMetadataValue, version: int) -> bytes:
    out = bytearray(b"\x00\x00")
    out += pack_i(v.epoch)
    w_tags(out, [(0, pack_q(v.metadata_hash))] if v.metadata_hash else [],
           v.unknown_tagged_fields)
    return bytes(out)


# --- type 4 -------------------------------------------------------------------

def _decode_topic_metadata(b: bytes, pos: int) -> tuple[TopicMetadata, int]:
    f = "TopicId"
    try:
        topic_id, pos = uuid_(b, pos)
        f = "TopicName"
        name, pos = cstring(b, pos)
        f = "NumPartitions"
        num = unpack_i(b, pos)[0]
        pos += 4
        f = "PartitionMetadata"
        n, pos = array_len(b, pos, True)
        parts = []
        for i in range(n):
            f = f"PartitionMetadata[{i}].Partition"
            p = unpack_i(b, pos)[0]
            pos += 4
            f = f"PartitionMetadata[{i}].Racks"
            racks, pos = string_array(b, pos, True)
            f = f"PartitionMetadata[{i}].(tagged fields)"
            ptags, pos = unknown_tags(b, pos)
            parts.append(PartitionMetadata(p, racks, ptags))
        f = "(tagged fields)"
        tags, pos = unknown_tags(b, pos)
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    return TopicMetadata(topic_id, name, num, tuple(parts), tags), pos


def decode_consumer_group_partition_metadata(b: bytes) -> ConsumerGroupPartitionMetadataValue:
    f, pos = "Topics", 2
    try:
        n, pos = array_len(b, pos, True)
        topics = []
        for i in range(n):
            f = f"Topics[{i}]"
            t, pos = _decode_topic_metadata(b, pos)
            topics.append(t)
        f = "(tagged fields)"
        tags, pos = unknown_tags(b, pos)
    except FieldError as e:
        raise nested(f, e) from None
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    check_end(b, pos)
    return ConsumerGroupPartitionMetadataValue(tuple(topics), tags)


def encode_consumer_group_partition_metadata(v: ConsumerGroupPartitionMetadataValue,
                                             version: int) -> bytes:
    out = bytearray(b"\x00\x00")
    w_array_len(out, len(v.topics), True)
    for t in v.topics:
        out += t.topic_id.bytes
        w_cstring(out, t.topic_name)
        out += pack_i(t.num_partitions)
        w_array_len(out, len(t.partition_metadata), True)
        for p in t.partition_metadata:
            out += pack_i(p.partition)
            w_string_array(out, p.racks, True)
            w_tags(out, [], p.unknown_tagged_fields)
        w_tags(out, [], t.unknown_tagged_fields)
    w_tags(out, [], v.unknown_tagged_fields)
    return bytes(out)


# --- type 5 -------------------------------------------------------------------

_EMPTY_CLASSIC = ClassicMemberMetadata()


def _decode_classic_member(b: bytes, pos: int) -> tuple[ClassicMemberMetadata, int]:
    f = "SessionTimeoutMs"
    try:
        session_timeout = unpack_i(b, pos)[0]
        pos += 4
        f = "SupportedProtocols"
        n, pos = array_len(b, pos, True)
        protocols = []
        for i in range(n):
            f = f"SupportedProtocols[{i}].Name"
            name, pos = cstring(b, pos)
            f = f"SupportedProtocols[{i}].Metadata"
            metadata, pos = cbytes(b, pos)
            f = f"SupportedProtocols[{i}].(tagged fields)"
            ptags, pos = unknown_tags(b, pos)
            protocols.append(ClassicProtocol(name, metadata, ptags))
        f = "(tagged fields)"
        tags, pos = unknown_tags(b, pos)
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    return ClassicMemberMetadata(session_timeout, tuple(protocols), tags), pos


def decode_consumer_group_member_metadata(b: bytes) -> ConsumerGroupMemberMetadataValue:
    f, pos = "InstanceId", 2
    classic: list[Any] = [_EMPTY_CLASSIC]  # absent tag: the empty struct, as Kafka reads it
    client: list[Any] = [()]

    def known(tag: int, start: int, end: int) -> bool:
        if tag == 1000:   # kcoord's ClientAssignors (records/_client_assignor.py)
            client[0] = decode_client_assignors(b, start, end)
            return True
        if tag != 0:
            return False
        presence, p = uvarint(b, start)
        if presence == 0:  # Kafka: readUnsignedVarint() <= 0 means null
            classic[0] = None
        else:
            try:
                classic[0], p = _decode_classic_member(b, p)
            except FieldError as e:
                raise nested("ClassicMemberMetadata", e) from None
        expect_end(p, end, "tagged field ClassicMemberMetadata")
        return True
    try:
        instance_id, pos = cnstring(b, pos)
        f = "RackId"
        rack_id, pos = cnstring(b, pos)
        f = "ClientId"
        client_id, pos = cstring(b, pos)
        f = "ClientHost"
        client_host, pos = cstring(b, pos)
        f = "SubscribedTopicNames"
        topics, pos = string_array(b, pos, True)
        f = "SubscribedTopicRegex"
        regex, pos = cnstring(b, pos)
        f = "RebalanceTimeoutMs"
        rebalance_timeout = unpack_i(b, pos)[0]
        pos += 4
        f = "ServerAssignor"
        assignor, pos = cnstring(b, pos)
        f = "(tagged fields)"
        tags, pos = tag_loop(b, pos, known)
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    check_end(b, pos)
    return ConsumerGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host, topics,
                                            regex, rebalance_timeout, assignor, classic[0], tags, client[0])


def _classic_member_tag(c: ClassicMemberMetadata | None) -> list[tuple[int, bytes]]:
    if c is None:
        return [(0, b"\x00")]
    if c.session_timeout_ms == 0 and not c.supported_protocols and not c.unknown_tagged_fields:
        return []  # equals Kafka's default (the empty struct): omitted
    out = bytearray(b"\x01")  # presence varint, then the struct
    out += pack_i(c.session_timeout_ms)
    w_array_len(out, len(c.supported_protocols), True)
    for p in c.supported_protocols:
        w_cstring(out, p.name)
        w_cbytes(out, p.metadata)
        w_tags(out, [], p.unknown_tagged_fields)
    w_tags(out, [], c.unknown_tagged_fields)
    return [(0, bytes(out))]


def encode_consumer_group_member_metadata(v: ConsumerGroupMemberMetadataValue,
                                          version: int) -> bytes:
    out = bytearray(b"\x00\x00")
    w_cnstring(out, v.instance_id)
    w_cnstring(out, v.rack_id)
    w_cstring(out, v.client_id)
    w_cstring(out, v.client_host)
    w_string_array(out, v.subscribed_topic_names, True)
    w_cnstring(out, v.subscribed_topic_regex)
    out += pack_i(v.rebalance_timeout_ms)
    w_cnstring(out, v.server_assignor)
    w_tags(out, _classic_member_tag(v.classic_member_metadata) + encode_client_assignors(v.client_assignors),
           v.unknown_tagged_fields)
    return bytes(out)


# --- type 6 -------------------------------------------------------------------

def decode_target_assignment_metadata(b: bytes) -> ConsumerGroupTargetAssignmentMetadataValue:
    f, pos = "AssignmentEpoch", 2
    found = {}

    def known(tag: int, start: int, end: int) -> bool:
        if tag == 0:
            expect_end(start + 8, end, "tagged field AssignmentTimestamp")
            found["ts"] = unpack_q(b, start)[0]
            return True
        return decode_target_metadata_tag(b, tag, start, end, found)   # kcoord's tags >= 1000
    try:
        epoch = unpack_i(b, pos)[0]
        pos += 4
        f = "(tagged fields)"
        tags, pos = tag_loop(b, pos, known)
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    check_end(b, pos)
    return ConsumerGroupTargetAssignmentMetadataValue(epoch, found.get("ts", 0), tags, found.get("error", 0),
                                                      found.get("name"))


def encode_target_assignment_metadata(v: ConsumerGroupTargetAssignmentMetadataValue,
                                      version: int) -> bytes:
    out = bytearray(b"\x00\x00")
    out += pack_i(v.assignment_epoch)
    w_tags(out, ([(0, pack_q(v.assignment_timestamp))] if v.assignment_timestamp else [])
           + encode_target_metadata_tags(v.assignment_error, v.client_assignor_name), v.unknown_tagged_fields)
    return bytes(out)


# --- type 16 ------------------------------------------------------------------

def decode_regular_expression(b: bytes) -> ConsumerGroupRegularExpressionValue:
    f, pos = "Topics", 2
    try:
        topics, pos = string_array(b, pos, True)
        f = "Version"
        version = unpack_q(b, pos)[0]
        pos += 8
        f = "Timestamp"
        ts = unpack_q(b, pos)[0]
        pos += 8
        f = "(tagged fields)"
        tags, pos = unknown_tags(b, pos)
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    check_end(b, pos)
    return ConsumerGroupRegularExpressionValue(topics, version, ts, tags)


def encode_regular_expression(v: ConsumerGroupRegularExpressionValue, version: int) -> bytes:
    out = bytearray(b"\x00\x00")
    w_string_array(out, v.topics, True)
    out += pack_q(v.version)
    out += pack_q(v.timestamp)
    w_tags(out, [], v.unknown_tagged_fields)
    return bytes(out)

