"""Value codecs of the assignment records: target assignment member (type 7)
and current member assignment (type 8). Both are version 0, flexible.

Type 8's TopicPartitions carries AssignmentEpochs (KIP-1251, Kafka 4.3):
tagged (tag 0), nullable, `"default": null` in the schema, which Kafka's
generator turns into an *empty-array* default (kafka-coordinator.md §2.3):
null is written explicitly (`00 01 00`), [] is omitted, absent reads as [].
Type 7's TopicPartition has no tagged field of its own.

Assignments are replayed for every member on load, so the TopicPartitions
reader inlines the single-byte varints Kafka writes in practice.
"""

from __future__ import annotations

from records._classic import check_end
from records._client_assignor import decode_metadata_tag, encode_metadata_tags
from records._consumer import tag_loop
from records._wire import (
    LOW_LEVEL,
    UUID_CACHE,
    FieldError,
    Malformed,
    array_len,
    expect_end,
    int32_array,
    int32_struct,
    nested,
    pack_b,
    pack_i,
    reason_of,
    tag_count,
    tagged_field,
    unpack_b,
    unpack_i,
    uuid_,
    uv,
    uvarint,
    w_array_len,
    w_int32s,
    w_tags,
)
from records.schemas import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupTargetAssignmentMemberValue,
    TopicPartitions,
)


def _decode_topic_partitions(b: bytes, pos: int, with_epochs: bool) -> tuple[TopicPartitions, int]:
    # Hot in replay (one per assigned topic), so single-byte varints are inlined.
    f = "TopicId"
    epochs: tuple[int, ...] | None = ()
    unknown: tuple[tuple[int, bytes], ...] = ()
    try:
        end = pos + 16
        topic_id = UUID_CACHE.get(b[pos:end])
        if topic_id is None:
            topic_id = uuid_(b, pos)[0]
        pos = end
        f = "Partitions"
        n = b[pos]
        if 0 < n < 0x80:
            n -= 1
            partitions = int32_struct(n).unpack_from(b, pos + 1)
            pos += 1 + 4 * n
        else:
            partitions, pos = int32_array(b, pos, True)
        f = "(tagged fields)"
        ntags = b[pos]
        if ntags == 0:
            return TopicPartitions(topic_id, partitions, (), ()), pos + 1
        if ntags == 1 and with_epochs and b[pos + 1] == 0:
            # What Kafka 4.3 writes: exactly one tag, AssignmentEpochs.
            f = "AssignmentEpochs"
            size = b[pos + 2]
            if size < 0x80:
                p = pos + 3
            else:
                size, p = uvarint(b, pos + 2)
            end = p + size
            count = b[p]
            if count == 0:
                epochs = None
                p += 1
            elif count < 0x80:
                epochs = int32_struct(count - 1).unpack_from(b, p + 1)
                p += 4 * count - 3
            else:
                count, p = uvarint(b, p)
                count -= 1
                # Checked before building a struct of `count` ints: a length bomb here
                # would otherwise allocate gigabytes.
                if 4 * count > min(end, len(b)) - p:
                    raise Malformed(f"{count} epochs cannot fit in the {min(end, len(b)) - p} "
                                    "bytes of the tagged field")
                if count < 0:
                    epochs = None  # a non-minimal varint 0: null, as Kafka reads it
                else:
                    epochs = int32_struct(count).unpack_from(b, p)
                    p += 4 * count
            expect_end(p, end, "tagged field AssignmentEpochs")
            return TopicPartitions(topic_id, partitions, epochs, ()), end
        n, pos = tag_count(b, pos)
        raw = []
        for _ in range(n):
            tag, start, end = tagged_field(b, pos)
            if tag == 0 and with_epochs:
                f = "AssignmentEpochs"
                pos = start
                count = b[pos]
                if count == 0:
                    epochs = None
                    pos += 1
                else:
                    if count < 0x80:
                        pos += 1
                    else:
                        count, pos = uvarint(b, pos)
                    count -= 1
                    if 4 * count > end - pos:
                        raise Malformed(f"{count} epochs cannot fit in {end - pos} bytes")
                    if count < 0:
                        epochs = None  # a non-minimal varint 0: null, as Kafka reads it
                    else:
                        epochs = int32_struct(count).unpack_from(b, pos)
                        pos += 4 * count
                expect_end(pos, end, "tagged field AssignmentEpochs")
                f = "(tagged fields)"
            else:
                raw.append((tag, b[start:end]))
            pos = end
        if raw:
            unknown = tuple(raw)
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    return TopicPartitions(topic_id, partitions, epochs, unknown), pos


def _decode_topic_partitions_array(b: bytes, pos: int, with_epochs: bool,
                                   field: str) -> tuple[tuple[TopicPartitions, ...], int]:
    n, pos = array_len(b, pos, True, 18)
    out = []
    for i in range(n):
        try:
            tp, pos = _decode_topic_partitions(b, pos, with_epochs)
        except FieldError as e:
            raise nested(f"{field}[{i}]", e) from None
        out.append(tp)
    return tuple(out), pos


def _encode_topic_partitions_array(out: bytearray, tps, with_epochs: bool) -> None:
    w_array_len(out, len(tps), True)
    for tp in tps:
        out += tp.topic_id.bytes
        partitions = tp.partitions
        out += uv(len(partitions) + 1)
        out += int32_struct(len(partitions)).pack(*partitions)
        epochs = tp.assignment_epochs
        if epochs and with_epochs and not tp.unknown_tagged_fields:
            # The common case, written inline: one tag (0) holding the epochs.
            count = uv(len(epochs) + 1)
            out += b"\x01\x00"
            out += uv(len(count) + 4 * len(epochs))
            out += count
            out += int32_struct(len(epochs)).pack(*epochs)
        elif not with_epochs:
            if epochs:
                raise ValueError("ConsumerGroupTargetAssignmentMemberValue (type 7) has no "
                                 "AssignmentEpochs; leave TopicPartitions.assignment_epochs ()")
            w_tags(out, [], tp.unknown_tagged_fields)
        elif epochs is None:
            w_tags(out, [(0, b"\x00")], tp.unknown_tagged_fields)
        elif not epochs:
            w_tags(out, [], tp.unknown_tagged_fields)
        else:
            data = bytearray(uv(len(epochs) + 1))
            w_int32s(data, epochs)
            w_tags(out, [(0, bytes(data))], tp.unknown_tagged_fields)


def _tags(b: bytes, pos: int, found: dict, with_error: bool) -> tuple[tuple[tuple[int, bytes], ...], int]:
    """The value's tag section: kcoord's client-assignor tags >= 1000 (records/
    _client_assignor.py) into `found`, any other tag kept raw."""
    return tag_loop(b, pos, lambda tag, start, end: decode_metadata_tag(b, tag, start, end, found, with_error))


def decode_target_assignment_member(b: bytes) -> ConsumerGroupTargetAssignmentMemberValue:
    f, pos = "TopicPartitions", 2
    try:
        tps, pos = _decode_topic_partitions_array(b, pos, False, f)
        f = "(tagged fields)"
        found: dict = {}
        tags, pos = _tags(b, pos, found, False)
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    check_end(b, pos)
    return ConsumerGroupTargetAssignmentMemberValue(tps, tags, found.get("version", -1), found.get("bytes"))


def encode_target_assignment_member(v: ConsumerGroupTargetAssignmentMemberValue,
                                    version: int) -> bytes:
    out = bytearray(b"\x00\x00")
    _encode_topic_partitions_array(out, v.topic_partitions, False)
    w_tags(out, encode_metadata_tags(None, v.metadata_version, v.metadata_bytes), v.unknown_tagged_fields)
    return bytes(out)


def decode_current_member_assignment(b: bytes) -> ConsumerGroupCurrentMemberAssignmentValue:
    f, pos = "MemberEpoch", 2
    try:
        epoch = unpack_i(b, pos)[0]
        pos += 4
        f = "PreviousMemberEpoch"
        previous = unpack_i(b, pos)[0]
        pos += 4
        f = "State"
        state = unpack_b(b, pos)[0]
        pos += 1
        f = "AssignedPartitions"
        assigned, pos = _decode_topic_partitions_array(b, pos, True, f)
        f = "PartitionsPendingRevocation"
        pending, pos = _decode_topic_partitions_array(b, pos, True, f)
        f = "(tagged fields)"
        found: dict = {}
        tags, pos = _tags(b, pos, found, True)
    except LOW_LEVEL as e:
        raise FieldError(f, pos, reason_of(e, b)) from None
    check_end(b, pos)
    return ConsumerGroupCurrentMemberAssignmentValue(epoch, previous, state, assigned, pending,
                                                     tags, found.get("error", 0), found.get("version", -1),
                                                     found.get("bytes"))


def encode_current_member_assignment(v: ConsumerGroupCurrentMemberAssignmentValue,
                                     version: int) -> bytes:
    out = bytearray(b"\x00\x00")
    out += pack_i(v.member_epoch)
    out += pack_i(v.previous_member_epoch)
    out += pack_b(v.state)
    _encode_topic_partitions_array(out, v.assigned_partitions, True)
    _encode_topic_partitions_array(out, v.partitions_pending_revocation, True)
    w_tags(out, encode_metadata_tags(v.error, v.metadata_version, v.metadata_bytes), v.unknown_tagged_fields)
    return bytes(out)
