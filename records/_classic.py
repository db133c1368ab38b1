"""Value codecs of the pre-KIP-848 records: offset commits (types 0, 1) and
classic group metadata (type 2).

OffsetCommitValue and GroupMetadataValue became flexible at version 4
(KIP-915), so that later fields can be added as tagged fields only.
Decoders take the whole value (version prefix included) and start at byte 2;
they raise `FieldError` naming the Kafka field and the byte it starts at.
"""

from __future__ import annotations

import struct

from records._wire import (
    LOW_LEVEL,
    UUID_CACHE,
    FieldError,
    TrailingBytes,
    array_len,
    bytes_,
    cbytes,
    cnstring,
    cstring,
    expect_end,
    nested,
    nstring,
    pack_h,
    pack_i,
    pack_q,
    reason_of,
    string,
    tag_count,
    tagged_field,
    unknown_tags,
    unpack_i,
    unpack_q,
    uuid_,
    w_array_len,
    w_bytes,
    w_cbytes,
    w_cnstring,
    w_cstring,
    w_nstring,
    w_string,
    w_tags,
)
from records.schemas import (
    ZERO_UUID,
    GroupMetadataValue,
    LegacyOffsetCommitValue,
    MemberMetadata,
    OffsetCommitValue,
)


def check_end(b: bytes, pos: int) -> None:
    """The struct ended at `pos`. Bytes after it are not an error (Kafka's readers ignore
    them); `TrailingBytes` tells the codec to decode `b[:pos]` and count the record."""
    if pos != len(b):
        raise TrailingBytes(pos, len(b))


# --- LegacyOffsetCommitValue (type 0, v0) -----------------------------------

def decode_legacy_offset_commit_v0(b: bytes) -> LegacyOffsetCommitValue:
    f, pos = "offset", 2
    try:
        offset = unpack_q(b, pos)[0]
        pos += 8
        f = "metadata"
        metadata, pos = string(b, pos)
        f = "commitTimestamp"
        ts = unpack_q(b, pos)[0]
        pos += 8
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    check_end(b, pos)
    return LegacyOffsetCommitValue(offset, metadata, ts)


def encode_legacy_offset_commit(v: LegacyOffsetCommitValue, version: int) -> bytes:
    out = bytearray(pack_h(version))
    out += pack_q(v.offset)
    w_string(out, v.metadata)
    out += pack_q(v.commit_timestamp)
    return bytes(out)


# --- OffsetCommitValue (type 1, v0-4) ---------------------------------------

def _decode_offset_commit_classic(b: bytes, version: int) -> OffsetCommitValue:
    f, pos = "offset", 2
    leader_epoch = expire = -1
    try:
        offset = unpack_q(b, pos)[0]
        pos += 8
        if version >= 3:
            f = "leaderEpoch"
            leader_epoch = unpack_i(b, pos)[0]
            pos += 4
        f = "metadata"
        metadata, pos = string(b, pos)
        f = "commitTimestamp"
        ts = unpack_q(b, pos)[0]
        pos += 8
        if version == 1:
            f = "expireTimestamp"
            expire = unpack_q(b, pos)[0]
            pos += 8
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    check_end(b, pos)
    return OffsetCommitValue(offset, leader_epoch, metadata, ts, expire, ZERO_UUID, ())


def decode_offset_commit_v0(b: bytes) -> OffsetCommitValue:
    return _decode_offset_commit_classic(b, 0)


def decode_offset_commit_v1(b: bytes) -> OffsetCommitValue:
    return _decode_offset_commit_classic(b, 1)


def decode_offset_commit_v2(b: bytes) -> OffsetCommitValue:
    return _decode_offset_commit_classic(b, 2)


def decode_offset_commit_v3(b: bytes) -> OffsetCommitValue:
    return _decode_offset_commit_classic(b, 3)


# What Kafka writes for a commit with empty metadata: offset, leaderEpoch,
# metadata length byte 1 (""), commitTimestamp, then the tag count (0, or 1
# followed by tag 0, size 16, topicId).
_V4_EMPTY_METADATA = struct.Struct(">qiBqB")


def decode_offset_commit_v4(b: bytes) -> OffsetCommitValue:
    n = len(b)
    if (n == 24 or n == 42) and b[14] == 1:
        offset, leader_epoch, _, ts, ntags = _V4_EMPTY_METADATA.unpack_from(b, 2)
        if ntags == 0 and n == 24:
            return OffsetCommitValue(offset, leader_epoch, "", ts, -1, ZERO_UUID, ())
        if ntags == 1 and n == 42 and b[24] == 0 and b[25] == 16:
            topic_id = UUID_CACHE.get(b[26:42])
            if topic_id is None:
                topic_id = uuid_(b, 26)[0]
            return OffsetCommitValue(offset, leader_epoch, "", ts, -1, topic_id, ())
    f, pos = "offset", 2
    topic_id = ZERO_UUID
    unknown = []
    try:
        offset = unpack_q(b, pos)[0]
        pos += 8
        f = "leaderEpoch"
        leader_epoch = unpack_i(b, pos)[0]
        pos += 4
        f = "metadata"
        metadata, pos = cstring(b, pos)
        f = "commitTimestamp"
        ts = unpack_q(b, pos)[0]
        pos += 8
        f = "(tagged fields)"
        ntags = b[pos]
        if ntags == 0:
            pos += 1
        else:
            ntags, pos = tag_count(b, pos)
            for _ in range(ntags):
                tag, start, end = tagged_field(b, pos)
                if tag == 0:
                    f = "topicId"
                    pos = start
                    topic_id, pos = uuid_(b, pos)
                    expect_end(pos, end, "tagged field topicId")
                    f = "(tagged fields)"
                else:
                    unknown.append((tag, b[start:end]))
                pos = end
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    check_end(b, pos)
    return OffsetCommitValue(offset, leader_epoch, metadata, ts, -1, topic_id, tuple(unknown))


def encode_offset_commit(v: OffsetCommitValue, version: int) -> bytes:
    out = bytearray(pack_h(version))
    out += pack_q(v.offset)
    if version >= 3:
        out += pack_i(v.leader_epoch)
    if version >= 4:
        w_cstring(out, v.metadata)
        out += pack_q(v.commit_timestamp)
        known = [] if v.topic_id == ZERO_UUID else [(0, v.topic_id.bytes)]
        w_tags(out, known, v.unknown_tagged_fields)
    else:
        w_string(out, v.metadata)
        out += pack_q(v.commit_timestamp)
        if version == 1:
            out += pack_q(v.expire_timestamp)
        no_tags(v, version)
    return bytes(out)


def no_tags(v, version: int) -> None:
    if v.unknown_tagged_fields:
        raise ValueError(f"tagged fields were set, but version {version} of "
                        f"{type(v).__name__} is not flexible")


# --- GroupMetadataValue (type 2, v0-4) --------------------------------------

def _decode_member(b: bytes, pos: int, version: int) -> tuple[MemberMetadata, int]:
    flexible = version >= 4
    rstr, rnstr, rbytes = (cstring, cnstring, cbytes) if flexible else (string, nstring, bytes_)
    f = "memberId"
    instance_id = None
    rebalance_timeout = -1
    tags: tuple[tuple[int, bytes], ...] = ()
    try:
        member_id, pos = rstr(b, pos)
        if version >= 3:
            f = "groupInstanceId"
            instance_id, pos = rnstr(b, pos)
        f = "clientId"
        client_id, pos = rstr(b, pos)
        f = "clientHost"
        client_host, pos = rstr(b, pos)
        if version >= 1:
            f = "rebalanceTimeout"
            rebalance_timeout = unpack_i(b, pos)[0]
            pos += 4
        f = "sessionTimeout"
        session_timeout = unpack_i(b, pos)[0]
        pos += 4
        f = "subscription"
        subscription, pos = rbytes(b, pos)
        f = "assignment"
        assignment, pos = rbytes(b, pos)
        if flexible:
            f = "(tagged fields)"
            tags, pos = unknown_tags(b, pos)
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    return MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout,
                          session_timeout, subscription, assignment, tags), pos


def _decode_group_metadata(b: bytes, version: int) -> GroupMetadataValue:
    flexible = version >= 4
    rstr, rnstr = (cstring, cnstring) if flexible else (string, nstring)
    f, pos = "protocolType", 2
    state_ts = -1
    tags: tuple[tuple[int, bytes], ...] = ()
    try:
        protocol_type, pos = rstr(b, pos)
        f = "generation"
        generation = unpack_i(b, pos)[0]
        pos += 4
        f = "protocol"
        protocol, pos = rnstr(b, pos)
        f = "leader"
        leader, pos = rnstr(b, pos)
        if version >= 2:
            f = "currentStateTimestamp"
            state_ts = unpack_q(b, pos)[0]
            pos += 8
        f = "members"
        n, pos = array_len(b, pos, flexible)
        members = []
        for i in range(n):
            f = f"members[{i}]"
            m, pos = _decode_member(b, pos, version)
            members.append(m)
        if flexible:
            f = "(tagged fields)"
            tags, pos = unknown_tags(b, pos)
    except FieldError as e:
        raise nested(f, e) from None
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    check_end(b, pos)
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts,
                              tuple(members), tags)


def decode_group_metadata_v0(b: bytes) -> GroupMetadataValue:
    return _decode_group_metadata(b, 0)


def decode_group_metadata_v1(b: bytes) -> GroupMetadataValue:
    return _decode_group_metadata(b, 1)


def decode_group_metadata_v2(b: bytes) -> GroupMetadataValue:
    return _decode_group_metadata(b, 2)


def decode_group_metadata_v3(b: bytes) -> GroupMetadataValue:
    return _decode_group_metadata(b, 3)


def decode_group_metadata_v4(b: bytes) -> GroupMetadataValue:
    return _decode_group_metadata(b, 4)


def encode_group_metadata(v: GroupMetadataValue, version: int) -> bytes:
    flexible = version >= 4
    wstr, wnstr, wbytes = (w_cstring, w_cnstring, w_cbytes) if flexible else (
        w_string, w_nstring, w_bytes)
    out = bytearray(pack_h(version))
    wstr(out, v.protocol_type)
    out += pack_i(v.generation)
    wnstr(out, v.protocol)
    wnstr(out, v.leader)
    if version >= 2:
        out += pack_q(v.current_state_timestamp)
    w_array_len(out, len(v.members), flexible)
    for m in v.members:
        wstr(out, m.member_id)
        if version >= 3:
            wnstr(out, m.group_instance_id)
        wstr(out, m.client_id)
        wstr(out, m.client_host)
        if version >= 1:
            out += pack_i(m.rebalance_timeout)
        out += pack_i(m.session_timeout)
        wbytes(out, m.subscription)
        wbytes(out, m.assignment)
        if flexible:
            w_tags(out, [], m.unknown_tagged_fields)
        else:
            no_tags(m, version)
    if flexible:
        w_tags(out, [], v.unknown_tagged_fields)
    else:
        no_tags(v, version)
    return bytes(out)

