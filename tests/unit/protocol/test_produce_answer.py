"""The fixed-layout check of the state topic's Produce answer (coordinator/protocol/
produce_answer.py) stands in for the generic path's bounded walk before kio's reader: it
accepts only bodies the walk accepts, whole, and the reader's value is the generic path's
(codec.decode_body: the walk, then kio's reader) wherever it accepts.

- kio's encodings of many random ProduceResponse v9 values (topics, partitions, error codes,
  offsets, log append times, record errors, error messages, throttle times): the reader
  returns the value the generic path returns, or None; and the common shape (no record
  errors, no message, CreateTime) is always accepted.
- Mutations of a few samples: every truncation, extensions, each byte replaced by several
  values at every offset, huge counts and multi-byte varints, a tagged field added: the
  reader never raises, never returns a value the generic path does not return, never
  allocates more than a small bound (a count is checked against the bytes left before use),
  and every body its check accepts is one the walk accepts, ending where the body ends (so
  kio reads no length the walk did not check).
- Through the upstream link's decoder (client._decode), a whole frame's answer is the generic
  path's, and a body the generic path refuses is refused with its error.
"""
from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.response import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from coordinator.protocol.checked import Malformed, struct_step
from coordinator.protocol.codec import BodyError, decode_body, encode_body
from coordinator.protocol.framing import SIZE
from coordinator.protocol.produce_answer import common_shape, read_produce_v9
from coordinator.upstream.client import _decode
from support.allocation import allocation_peak

CODES = list(ErrorCode)
# A hostile byte's worst cases: the top of a one-byte varint, a varint's continuation, zero.
BYTES = (0x00, 0x01, 0x02, 0x7E, 0x7F, 0x80, 0xFF)
ALLOCATION_BOUND = 64 * 1024


def _partition(rng: random.Random, common: bool) -> PartitionProduceResponse:
    extra = not common and rng.random() < 0.5
    return PartitionProduceResponse(
        index=i32(rng.choice((0, 1, 7, 2**31 - 1, -1, rng.randrange(-2**31, 2**31)))),
        error_code=rng.choice((ErrorCode.none, ErrorCode.none, *CODES)),
        base_offset=i64(rng.choice((-1, 0, rng.randrange(2**63), rng.randrange(-2**63, 2**63)))),
        log_append_time=(datetime.fromtimestamp(rng.randrange(2**31), UTC)
                         if extra and rng.random() < 0.5 else None),
        log_start_offset=i64(rng.choice((-1, 0, rng.randrange(-2**63, 2**63)))),
        record_errors=(tuple(BatchIndexAndErrorMessage(batch_index=i32(rng.randrange(100)),
                                                       batch_index_error_message=rng.choice((None, "bad")))
                             for _ in range(rng.randrange(1, 3)))
                       if extra and rng.random() < 0.5 else ()),
        error_message=rng.choice((None, "", "not leader")) if extra else None)


def _name(rng: random.Random) -> str:
    size = rng.choice((0, 1, 11, 126, 127, 200))
    return "".join(rng.choice("abcXYZ._-é") for _ in range(size))


def _response(rng: random.Random, common: bool) -> ProduceResponse:
    return ProduceResponse(
        responses=tuple(TopicProduceResponse(
            name=TopicName(_name(rng) if not common else rng.choice(("__kcoord_cg", "t", "é-x"))),
            partition_responses=tuple(_partition(rng, common) for _ in range(rng.choice((0, 1, 4, 9, 127, 130))
                                                                               if not common else rng.randrange(1, 9))))
            for _ in range(rng.choice((0, 1, 1, 2, 3)) if not common else 1)),
        throttle_time=i32Timedelta.parse(timedelta(milliseconds=rng.choice((0, 0, 1, 2**31 - 1)))))


def _generic(body: bytes) -> tuple[str, Any]:
    try:
        return "value", decode_body(ProduceResponse, body, 0)
    except (BodyError, ValueError) as e:       # what client._complete turns into UpstreamError
        return "error", type(e)


def _fast(body: bytes) -> ProduceResponse | None:
    """The reader on ``body``, with its allocations traced: a count it did not check would
    show as an allocation past the bound."""
    bound = ALLOCATION_BOUND + 200 * len(body)
    (shape, value), peak = allocation_peak(lambda: (common_shape(body, 0), read_produce_v9(body, 0)), bound)
    assert peak < bound, (peak, body.hex())
    if shape:
        try:
            assert struct_step(ProduceResponse)(body, 0, len(body)) == len(body), body.hex()
        except Malformed:
            pytest.fail(f"the check accepted a body the walk refuses: {body.hex()}")
    else:
        assert value is None
    return value


def _agrees(body: bytes) -> bool:
    """True when the reader accepted. It never raises (an exception fails the test) and never
    returns what the generic path would not."""
    value = _fast(body)
    if value is None:
        return False
    assert _generic(body) == ("value", value), body.hex()
    return True


def test_common_answers_are_read_as_the_generic_path_reads_them() -> None:
    rng = random.Random(1)
    for _ in range(300):
        response = _response(rng, common=True)
        body = encode_body(response)
        assert _fast(body) == decode_body(ProduceResponse, body, 0) == response
        assert _agrees(body)


def test_any_answer_is_read_as_the_generic_path_reads_it_or_declined() -> None:
    rng = random.Random(2)
    accepted = declined = 0
    for _ in range(400):
        body = encode_body(_response(rng, common=False))
        if _agrees(body):
            accepted += 1
        else:
            declined += 1
            assert _generic(body)[0] == "value"      # kio's own encoding: the generic path reads it
    assert accepted > 50 and declined > 50          # both sides of the shape were exercised


def _samples() -> list[bytes]:
    rng = random.Random(3)
    return [encode_body(_response(rng, common=True)) for _ in range(3)] + [
        encode_body(ProduceResponse(responses=(TopicProduceResponse(name=TopicName("__kcoord_cg"), partition_responses=(
            PartitionProduceResponse(index=i32(0), error_code=ErrorCode.none, base_offset=i64(41),
                                     log_append_time=None, log_start_offset=i64(0), record_errors=(),
                                     error_message=None),)),), throttle_time=i32Timedelta.parse(timedelta(0))))]


@pytest.mark.parametrize("sample", range(4))
def test_mutations_never_differ_from_the_generic_path(sample: int) -> None:
    body = _samples()[sample]
    assert _agrees(body)
    for end in range(len(body)):                                # every truncation
        assert not _agrees(body[:end])
    for tail in (b"\x00", b"\x00" * 5, b"\xff" * 9, body):       # every extension is declined
        assert not _agrees(body + tail)
    for at in range(len(body)):                                 # each byte, several values
        for value in BYTES:
            mutated = body[:at] + bytes((value,)) + body[at + 1:]
            _agrees(mutated)
        for varint in (b"\xff\xff\xff\xff\x0f", b"\x80\x01", b"\xff\xff\xff\x7f"):   # huge counts
            _agrees(body[:at] + varint + body[at + 1:])


def test_a_tagged_field_or_a_record_error_falls_back_to_the_generic_path() -> None:
    body = _samples()[3]
    tail = body.index(b"\x01\x00\x00", 1 + 1 + 11 + 1 + 28)    # the partition's tail
    # An unknown tagged field (tag 5, one byte): kio skips it, as Kafka's readers do.
    tagged = body[:tail] + b"\x01\x00\x01\x05\x01\x00" + body[tail + 3:]
    assert _fast(tagged) is None
    assert _generic(tagged) == ("value", decode_body(ProduceResponse, body, 0))
    message = body[:tail] + b"\x01\x03no\x00" + body[tail + 3:]
    assert _fast(message) is None
    assert _generic(message)[1].responses[0].partition_responses[0].error_message == "no"


def _frame(body: bytes, correlation_id: int = 7) -> bytes:
    payload = SIZE.pack(correlation_id) + b"\x00" + body        # response header v1: no tags
    return SIZE.pack(len(payload)) + payload


def test_the_links_decoder_answers_as_before() -> None:
    for body in _samples():
        assert _decode(_frame(body), 0, 9) == decode_body(ProduceResponse, body, 0)
    # A body both refuse: the generic path's error, as before.
    broken = _samples()[0][:-2]
    with pytest.raises(BodyError):
        decode_body(ProduceResponse, broken, 0)
    with pytest.raises(BodyError):
        _decode(_frame(broken), 0, 9)
