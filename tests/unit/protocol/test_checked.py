"""The bounded walk (coordinator/protocol/checked.py) before kio's native reader.

Agreement: on every valid message of every API and version kio knows, the walk ends
exactly where kio's reader ends. Hostility: a length, count or tagged size that claims more
than the frame holds, a non-nullable field sent null, and every mutation class of
fuzz/mutations.py give BodyError naming the field; nothing else escapes. The 30-byte frame
that made kio allocate 34 GB (a ConsumerGroupHeartbeat's 5-byte count) is refused before kio runs.
"""
from __future__ import annotations

import dataclasses
import random
import struct

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map

from coordinator.protocol.apis import kio_version_range, request_class
from coordinator.protocol.checked import Malformed, check_body
from coordinator.protocol.codec import BodyError, decode_body, encode_body, reader_for
from fuzz.mutations import MUTATIONS
from fuzz.samples import sample
from fuzz.targets import SERVED, TARGETS, request_frame

from .kio_alone import kio_alone_aborts

ALL_CLASSES = [(name, version, load) for key, name in sorted(api_key_map.items())
               for version in sorted(schema_name_map[name])
               for load in (load_request_schema, load_response_schema)]

# ConsumerGroupHeartbeat v1 body whose SubscribedTopicNames compact-array length is the
# varint ff ff ff ff 0f (2**32 - 2 elements): the frame that killed kcoord.
CGH_BOMB = (b"\x03g1" + b"\x02m" + struct.pack(">i", 0) + b"\x00\x00" + struct.pack(">i", -1)
            + b"\xff\xff\xff\xff\x0f")


@pytest.mark.parametrize("name,version,load", ALL_CLASSES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_walk_ends_where_kio_ends_on_valid_messages(name, version, load):
    cls = load(next(k for k, n in api_key_map.items() if n == name), version)
    rng = random.Random(f"{name}-{version}-{load.__name__}")
    for _ in range(8):
        message = sample(cls, rng)
        data = encode_body(message)
        assert check_body(cls, data, 0) == len(data)
        _, used = reader_for(cls)(data, 0)
        assert used == len(data)
        decode_body(cls, data, 0)          # the checked path accepts what kio accepts


def test_the_heartbeat_length_bomb_is_refused_before_kio_runs():
    cls = request_class(68, 1)
    with pytest.raises(BodyError) as info:
        decode_body(cls, CGH_BOMB, 0)
    text = str(info.value)
    assert "subscribed_topic_names" in text and "4294967294" in text and "0 bytes remaining" in text
    # Without the walk, kio's reader aborts the process: shown in a child process.
    assert kio_alone_aborts("from coordinator.protocol.apis import request_class",
                            "request_class(68, 1)", CGH_BOMB)


# A connect group's heartbeat response (private key 32703) whose Assignment marker is -127:
# Kafka's readers take any negative marker as null, kio's native reader only -1. The walk
# once skipped it as null and kio then read a struct from lengths nobody checked: 94 GB
# asked for by these 34 bytes (found by fuzz/atheris_connect.py).
CONNECT_MARKER_BOMB = bytes.fromhex(
    "ffffff00" "0000" "00" "00" "00000000" "04040000" "81" "0000ffffffff2b00ffffffff3fffff")


@pytest.mark.parametrize("marker", [0x80, 0x81, 0xC0, 0xFE])
def test_a_struct_null_marker_other_than_minus_one_is_malformed(marker):
    from coordinator.protocol.connect_messages import RESPONSES
    cls = RESPONSES[min(RESPONSES)]
    body = CONNECT_MARKER_BOMB[:16] + bytes([marker]) + CONNECT_MARKER_BOMB[17:]
    with pytest.raises(BodyError, match=rf"assignment: null marker {marker - 256} of a struct"):
        decode_body(cls, body, 0)
    # StreamsGroupHeartbeat v0's Topology is such a struct on a request kcoord serves.
    streams = (b"\x03g1" + b"\x02m" + struct.pack(">ii", 0, 0) + b"\x00\x00" + struct.pack(">i", 45000)
               + bytes([marker]) + b"\x00\x00\x00\x00\xff\x00\x00\x00\x00\x00")
    with pytest.raises(BodyError, match=rf"topology: null marker {marker - 256} of a struct"):
        decode_body(request_class(88, 0), streams, 0)


def test_the_marker_bomb_is_refused_before_kio_runs():
    from coordinator.protocol.connect_messages import RESPONSES
    cls = RESPONSES[min(RESPONSES)]
    with pytest.raises(BodyError):
        decode_body(cls, CONNECT_MARKER_BOMB, 0)
    # -1 still reads as null, 1 as a struct.
    null = CONNECT_MARKER_BOMB[:16] + b"\xff\x00"
    assert decode_body(cls, null, 0).assignment is None
    # Without the walk, kio's reader aborts the process: shown in a child process.
    assert kio_alone_aborts("from coordinator.protocol.connect_messages import RESPONSES",
                            "RESPONSES[min(RESPONSES)]", CONNECT_MARKER_BOMB)


# An ApiVersions v3 response (error 0, no api keys, throttle 0) with two tagged fields: tag 1
# (finalized_features_epoch, an int64) whose size says 15 bytes, and tag 3. The walk skipped
# the 15 bytes; kio, like Kafka's readers, reads the 8 of the int64 and takes the next 7 as
# its second field: tag 0 (supported_features), a compact array of 2**32 - 2 entries the
# walk never saw.
TAG_PADDING_BOMB = (b"\x00\x00" + b"\x01" + struct.pack(">i", 0) + b"\x02"
                    + b"\x01\x0f" + struct.pack(">q", 5) + b"\x00\x00\xff\xff\xff\xff\x0f" + b"\x03\x01\x00")


def test_a_known_tagged_field_whose_value_does_not_fill_its_size_is_malformed():
    from coordinator.protocol.apis import response_class
    cls = response_class(18, 3)
    with pytest.raises(BodyError, match=r"_tagged_fields\.finalized_features_epoch: tagged field 1's size says "
                                        r"15 bytes, but its value takes 8 \(at byte 10\)"):
        decode_body(cls, TAG_PADDING_BOMB, 0)
    # One byte more than the value, in a served request: Fetch v12's cluster_id (tag 0).
    fetch = request_class(1, 12)
    body = encode_body(dataclasses.replace(sample(fetch, random.Random(4)), cluster_id="c"))
    assert body.endswith(b"\x01\x00\x02\x02c")
    with pytest.raises(BodyError, match=r"cluster_id: tagged field 0's size says 3 bytes, but its value takes 2"):
        decode_body(fetch, body[:-3] + b"\x03\x02c\x00", 0)
    # A value longer than its size stays refused, and the exact size still reads.
    with pytest.raises(BodyError, match=r"cluster_id: .*1 bytes remain|cluster_id: length 1 but only 0"):
        decode_body(fetch, body[:-3] + b"\x01\x02c", 0)
    assert decode_body(fetch, body, 0).cluster_id == "c"


def test_the_tag_padding_bomb_is_refused_before_kio_runs():
    from coordinator.protocol.apis import response_class
    with pytest.raises(BodyError):
        decode_body(response_class(18, 3), TAG_PADDING_BOMB, 0)
    # Without the walk, kio's reader aborts the process: shown in a child process.
    assert kio_alone_aborts("from coordinator.protocol.apis import response_class",
                            "response_class(18, 3)", TAG_PADDING_BOMB)


def test_a_tagged_nullable_struct_is_walked_with_its_marker_as_kio_reads_it():
    from tests.unit.protocol.kio_shapes import Inner, TaggedNullableStruct
    cls = TaggedNullableStruct
    # a=1, one tagged field: tag 0 of 6 bytes, marker 1, x=7, no tags of its own
    marked = bytes.fromhex("00000001" "01" "0006" "01" "00000007" "00")
    assert check_body(cls, marked, 0) == len(marked)
    assert reader_for(cls)(marked, 0) == (cls(a=1, inner=Inner(x=7)), len(marked))
    null = bytes.fromhex("00000001" "01" "0001" "ff")
    assert check_body(cls, null, 0) == len(null)
    assert reader_for(cls)(null, 0) == (cls(a=1, inner=None), len(null))
    # kio's writer writes no marker there: its reader would take the 00 of x as "present"
    # and read one byte past the value; the walk refuses it instead.
    unmarked = encode_body(cls(a=1, inner=Inner(x=7)))
    assert unmarked == bytes.fromhex("00000001" "01" "0005" "00000007" "00")
    with pytest.raises(Malformed, match="inner"):
        check_body(cls, unmarked, 0)


def test_non_nullable_array_sent_null_is_malformed():
    # ListGroups v5: StatesFilter is a non-nullable compact array; 0 is the null marker.
    cls = request_class(16, 5)
    with pytest.raises(BodyError, match="states_filter: non-nullable array was serialized as null"):
        decode_body(cls, b"\x00\x01\x00", 0)


def test_non_nullable_legacy_string_sent_null_is_malformed():
    cls = request_class(12, 3)     # Heartbeat v3: group_id is a non-nullable int16 string
    with pytest.raises(BodyError, match="group_id: non-nullable field was serialized as null"):
        decode_body(cls, b"\xff\xff" + bytes(20), 0)


def test_string_above_kafkas_limit_is_malformed():
    cls = request_class(69, 0)     # ConsumerGroupDescribe v0: group_ids compact string array
    body = b"\x02" + b"\x81\x80\x02" + b"x" * 32768 + b"\x00\x00"   # varint 32769: 32768 bytes
    with pytest.raises(BodyError, match=r"group_ids\[0\]: string length 32768 is above 32767"):
        decode_body(cls, body, 0)


def test_legacy_array_count_larger_than_the_frame_is_malformed():
    cls = request_class(15, 3)     # DescribeGroups v3: groups int32 count
    with pytest.raises(BodyError, match="tried to allocate a collection of size 2147483647"):
        decode_body(cls, b"\x7f\xff\xff\xff\x00", 0)


def test_tagged_field_larger_than_the_frame_is_malformed():
    cls = request_class(18, 3)     # ApiVersions v3: two compact strings then tagged fields
    with pytest.raises(BodyError, match="_tagged_fields: tagged field 0 of 4294967295 bytes"):
        decode_body(cls, b"\x02a\x02b\x01\x00\xff\xff\xff\xff\x0f", 0)


def test_varint_longer_than_five_bytes_is_malformed():
    cls = request_class(69, 0)
    with pytest.raises(BodyError, match="varint longer than 5 bytes"):
        decode_body(cls, b"\x80\x80\x80\x80\x80\x01", 0)


def test_error_names_nested_field_and_offset():
    import uuid

    from kio.schema.consumer_group_heartbeat.v1.request import TopicPartitions
    cls = request_class(68, 1)
    message = sample(cls, random.Random(3))
    import dataclasses
    message = dataclasses.replace(message, topic_partitions=(
        TopicPartitions(topic_id=uuid.UUID(int=1), partitions=(7,)),))
    valid = encode_body(message)
    # the body ends: partitions count 0x02, int32 7, the element's tags, the body's tags
    bomb = valid[:-7] + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(Malformed) as info:
        check_body(cls, bomb, 0)
    assert info.value.field == "topic_partitions[0].partitions"
    assert f"at byte {len(valid) - 7}" in str(info.value)


SERVED_VERSIONS = [(t.api_key, v) for t in TARGETS
                   for v in range(*(lambda r: (r[0], r[1] + 1))(kio_version_range(t.api_key)))]


@pytest.mark.parametrize("api_key,version", SERVED_VERSIONS)
def test_mutated_requests_give_body_errors_only(api_key, version):
    """Every mutation class over every decoded API and version: decoding returns or raises
    BodyError; nothing else escapes (no MemoryError, IndexError, struct.error, abort)."""
    target = next(t for t in TARGETS if t.api_key == api_key)
    cls = request_class(api_key, version)
    rng = random.Random(api_key * 1000 + version)
    for _ in range(40):
        frame, body = request_frame(target, version, 1, rng, "__kcoord_offsets")
        for name, mutate in MUTATIONS.items():
            if name in ("wrong_version", "lying_size", "header_lie"):
                continue            # framing and header: covered by the gateway tests
            mutated = mutate(frame, body, rng)
            try:
                decode_body(cls, mutated, body)
            except BodyError:
                pass


def test_table_covers_every_api_the_group_service_serves():
    from coordinator.protocol.apis import GROUP_APIS
    served = {t.api_key for t in TARGETS if t.handling == SERVED}
    known = {k for k in GROUP_APIS if kio_version_range(k) is not None}
    assert known - {88, 89} <= served      # streams groups are not served (their APIs close)


@pytest.mark.parametrize("version", [0, 1])
def test_steady_heartbeat_fast_path_agrees_with_the_general_walk(version):
    """The straight-line walk of steady ConsumerGroupHeartbeats ends where the general walk
    ends, or both refuse, on valid, steady-shaped and mutated bodies."""
    import dataclasses

    from coordinator.protocol.checked import _compile, struct_step
    cls = request_class(68, version)
    fast, general = struct_step(cls), _compile(cls)
    assert fast is not general
    rng = random.Random(version)

    def outcome(step, data):
        try:
            return step(data, 0, len(data))
        except Malformed as e:
            return str(e)
    for i in range(3000):
        message = sample(cls, rng)
        if i % 2:
            nulls = {f.name: None for f in dataclasses.fields(cls)
                     if f.name not in ("group_id", "member_id", "member_epoch", "rebalance_timeout")}
            message = dataclasses.replace(message, **nulls)
        data = encode_body(message)
        if i % 3 == 0:
            data = bytearray(data)
            data[rng.randrange(len(data))] = rng.choice((0, 1, 0x7f, 0x80, 0xff))
            data = bytes(data[:rng.randint(1, len(data))] if i % 5 == 0 else data)
        assert outcome(fast, data) == outcome(general, data)


def test_steady_heartbeat_decoding_is_remembered_and_bounded(monkeypatch):
    """A repeated heartbeat body is decoded once; a malformed one is never remembered; the
    memo is cleared when full, so distinct bodies cannot grow it."""
    from coordinator.protocol import codec
    cls = request_class(68, 1)
    monkeypatch.setattr(codec, "MEMO_MAX_ENTRIES", 3)
    memo = codec._MEMOS[cls]
    memo.clear()
    body = encode_body(cls(group_id="g", member_id="m", member_epoch=3, instance_id=None, rack_id=None,
                           subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
                           topic_partitions=None))
    frame = b"HEAD" + body
    first = decode_body(cls, frame, 4)
    assert decode_body(cls, b"OTHER" + body, 5) is first          # the header differs, the body not
    with pytest.raises(BodyError):
        decode_body(cls, CGH_BOMB, 0)
    assert CGH_BOMB not in memo
    for epoch in range(10):
        decode_body(cls, encode_body(dataclasses.replace(first, member_epoch=epoch)), 0)
        assert len(memo) <= 3


def test_a_memoized_request_is_parsed_once_header_included_and_bounded(monkeypatch):
    """decode_request remembers the whole parse (client id and body) of a memoized class by
    the bytes after the correlation id; a frame that does not parse is refused every time
    and never remembered; the memo is cleared when full."""
    from coordinator.protocol import codec
    from coordinator.protocol.framing import HeaderError, RequestHeader

    cls = request_class(68, 1)
    monkeypatch.setattr(codec, "MEMO_MAX_ENTRIES", 3)
    memo = codec._REQUEST_MEMOS[cls]
    memo.clear()

    def frame(correlation_id: int, client_id: str | None, body: bytes) -> bytes:
        payload = RequestHeader(68, 1, correlation_id, client_id).encode(2) + body
        return struct.pack(">i", len(payload)) + payload

    request = cls(group_id="g", member_id="m", member_epoch=3, instance_id=None, rack_id=None,
                  subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
                  topic_partitions=None)
    body = encode_body(request)
    first = codec.decode_request(cls, frame(1, "client-a", body), 2)
    assert first == ("client-a", request)
    assert codec.decode_request(cls, frame(2, "client-a", body), 2) is first    # another correlation id
    other = codec.decode_request(cls, frame(3, "client-b", body), 2)
    assert other == ("client-b", request) and other is not first                # another client id
    with pytest.raises(BodyError):
        codec.decode_request(cls, frame(4, "client-a", CGH_BOMB), 2)
    with pytest.raises(HeaderError):
        codec.decode_request(cls, struct.pack(">ihhi", 9, 68, 1, 5) + b"\x00\x09ab", 2)   # client id cut short
    assert all(key.endswith(body) for key in memo)
    for epoch in range(10):
        codec.decode_request(cls, frame(5, "c", encode_body(dataclasses.replace(request, member_epoch=epoch))), 2)
        assert len(memo) <= 3


def test_only_small_requests_are_remembered_and_each_in_one_memo():
    """The memos hold at most MEMO_MAX_BYTES per entry (a hostile client's large distinct
    heartbeats are decoded, never kept), and a request remembered whole is not kept again
    by its body."""
    from coordinator.protocol import codec
    from coordinator.protocol.framing import RequestHeader

    cls = request_class(68, 1)
    codec._MEMOS[cls].clear()
    codec._REQUEST_MEMOS[cls].clear()

    def frame(group_id: str) -> bytes:
        body = encode_body(cls(group_id=group_id, member_id="m", member_epoch=3, instance_id=None, rack_id=None,
                               subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
                               topic_partitions=None))
        payload = RequestHeader(68, 1, 7, "c").encode(2) + body
        return struct.pack(">i", len(payload)) + payload

    big = frame("g" * (codec.MEMO_MAX_BYTES + 1))
    assert codec.decode_request(cls, big, 2)[1].group_id == "g" * (codec.MEMO_MAX_BYTES + 1)
    assert not codec._REQUEST_MEMOS[cls] and not codec._MEMOS[cls]
    small = frame("g")
    assert codec.decode_request(cls, small, 2)[1].group_id == "g"
    assert len(codec._REQUEST_MEMOS[cls]) == 1 and not codec._MEMOS[cls]
