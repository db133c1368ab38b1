"""The upstream link's decoder (coordinator/upstream/client.py `_decode`) reads the state
topic's Produce v9 answer past a response header without tagged fields at a fixed offset;
a header with tagged fields, or a frame too short for it, takes the generic path, and every
answer is the generic path's value."""
from __future__ import annotations

from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.response import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from coordinator.protocol.codec import BodyError, decode_body, encode_body
from coordinator.protocol.framing import SIZE
from coordinator.upstream.client import _decode

PRODUCE = 0


def _body(partitions: int) -> bytes:
    return encode_body(ProduceResponse(
        responses=(TopicProduceResponse(name=TopicName("__kcoord_cg"), partition_responses=tuple(
            PartitionProduceResponse(index=i32(p), error_code=ErrorCode.none, base_offset=i64(100 + p),
                                     log_append_time=None, log_start_offset=i64(0), record_errors=(),
                                     error_message=None) for p in range(partitions))),),
        throttle_time=i32Timedelta.parse(timedelta(0))))


def _frame(header_tags: bytes, body: bytes) -> bytes:
    payload = SIZE.pack(7) + header_tags + body
    return SIZE.pack(len(payload)) + payload


@pytest.mark.parametrize("header_tags", [b"\x00", b"\x01\x00\x02hi"])
@pytest.mark.parametrize("partitions", [1, 4])
def test_the_produce_answer_is_the_generic_paths_past_any_header(header_tags, partitions):
    body = _body(partitions)
    answer = _decode(_frame(header_tags, body), PRODUCE, 9)
    assert answer == decode_body(ProduceResponse, body, 0)
    assert [int(p.base_offset) for p in answer.responses[0].partition_responses] == \
        [100 + p for p in range(partitions)]


def test_a_frame_too_short_for_a_body_is_refused_as_before():
    with pytest.raises(BodyError):
        _decode(_frame(b"\x00", b""), PRODUCE, 9)
