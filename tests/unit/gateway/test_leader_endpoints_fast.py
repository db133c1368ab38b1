"""The fast check in front of the KIP-951 walk (coordinator/gateway/leader_endpoints.py): an
answer of the common shape (every tagged section empty) passes without the walk; anything else
goes to the walk, so the outcome of every answer, hostile ones included, is the walk's own."""
from __future__ import annotations

import datetime
import importlib
import random
import types
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from coordinator.gateway import leader_endpoints
from coordinator.gateway.forward import Pending, UpstreamLink
from coordinator.gateway.leader_endpoints import body_offset, rewrite_leader_endpoints, walk_leader_endpoints
from coordinator.gateway.routes import build_routes, route_key
from coordinator.protocol.apis import FETCH, PRODUCE, response_class
from coordinator.protocol.codec import BodyError, encode_response_frame
from coordinator.protocol.framing import HeaderError, decode_response_header

from .test_leader_endpoints import _Client

ZERO = i32Timedelta.parse(datetime.timedelta(0))
VERSIONS = [(PRODUCE, v) for v in (10, 11, 12, 13)] + [(FETCH, v) for v in (16, 17, 18)]


def address_of(node_id: int, host: str, port: int) -> tuple[str, int]:
    return "gw.example", 19000 + node_id


def _module(api_key: int, version: int):
    return importlib.import_module(response_class(api_key, version).__module__)


def plain_produce(version: int, topics: int = 2, partitions: int = 3, name: str = "orders",
                  message: str | None = "fine") -> bytes:
    """No leader change: no CurrentLeader, no NodeEndpoints (how Kafka answers a good produce)."""
    m = _module(PRODUCE, version)
    responses = []
    for t in range(topics):
        topic = {"topic_id": uuid.UUID(int=t + 1)} if version >= 13 else {"name": TopicName(f"{name}{t}")}
        parts = tuple(m.PartitionProduceResponse(index=i32(p), error_code=ErrorCode.none, base_offset=i64(40 + p),
                                                 record_errors=(), error_message=message if p == 1 else None)
                      for p in range(partitions))
        responses.append(m.TopicProduceResponse(**topic, partition_responses=parts))
    return encode_response_frame(PRODUCE, version, 7, response_class(PRODUCE, version)(
        responses=tuple(responses), throttle_time=ZERO))


def plain_fetch(version: int, topics: int = 2, partitions: int = 3, record_bytes: int = 300,
                aborted: int = 1) -> bytes:
    """No leader change; records of several lengths (null, short, multi-byte varint), aborted
    transactions null, empty and not."""
    m = _module(FETCH, version)
    responses = []
    for t in range(topics):
        parts = []
        for p in range(partitions):
            txns = None if p == 0 else tuple(
                m.AbortedTransaction(producer_id=ProducerId(p), first_offset=i64(k)) for k in range(aborted * (p - 1)))
            parts.append(m.PartitionData(partition_index=i32(p), error_code=ErrorCode.none, high_watermark=i64(10),
                                         last_stable_offset=i64(9), log_start_offset=i64(0), aborted_transactions=txns,
                                         preferred_read_replica=BrokerId(-1),
                                         records=None if p == 2 else b"\x05" * (record_bytes * (p + 1))))
        responses.append(m.FetchableTopicResponse(topic_id=uuid.UUID(int=t + 1), partitions=tuple(parts)))
    return encode_response_frame(FETCH, version, 7, response_class(FETCH, version)(
        throttle_time=ZERO, error_code=ErrorCode.none, session_id=i32(3), responses=tuple(responses)))


def moved_fetch(version: int) -> bytes:
    """A partition moved: CurrentLeader on it and the new leader's endpoint (Kafka's KIP-951 answer)."""
    m = _module(FETCH, version)
    moved = m.PartitionData(partition_index=i32(1), error_code=ErrorCode.not_leader_or_follower,
                            high_watermark=i64(-1), aborted_transactions=None, records=None,
                            current_leader=m.LeaderIdAndEpoch(leader_id=BrokerId(2), leader_epoch=i32(8)))
    return encode_response_frame(FETCH, version, 7, response_class(FETCH, version)(
        throttle_time=ZERO, error_code=ErrorCode.none, session_id=i32(3),
        responses=(m.FetchableTopicResponse(topic_id=uuid.UUID(int=9), partitions=(moved,)),),
        node_endpoints=(m.NodeEndpoint(node_id=BrokerId(2), host="broker-2", port=i32(9094), rack=None),)))


def plain(api_key: int, version: int, **kw) -> bytes:
    return plain_produce(version, **kw) if api_key == PRODUCE else plain_fetch(version, **kw)


def outcome(fn, api_key: int, version: int, frame: bytes, offset: int | None = None):
    """What `fn` makes of `frame`: ("frame", bytes, unchanged?) or ("refused", message)."""
    try:
        out = fn(api_key, version, frame, 9 if offset is None else offset, address_of)
    except BodyError as e:
        return ("refused", str(e))
    return ("frame", out, out is frame)


@pytest.fixture
def no_walk(monkeypatch):
    """The walk fails the test if it is reached."""
    def walk(*args):
        raise AssertionError("the common answer reached the full walk")
    monkeypatch.setattr(leader_endpoints, "walk_leader_endpoints", walk)


@pytest.mark.parametrize(("api_key", "version"), VERSIONS)
def test_the_common_answer_passes_without_the_walk(no_walk, api_key, version):
    for kw in ({}, {"topics": 0}, {"topics": 1, "partitions": 0}, {"topics": 3, "partitions": 5}):
        frame = plain(api_key, version, **kw)
        assert rewrite_leader_endpoints(api_key, version, frame, 9, address_of) is frame, kw


EMPTY_ENDPOINTS = b"\x01"      # NodeEndpoints, a compact array of no element


@pytest.mark.parametrize(("api_key", "version"), VERSIONS)
def test_an_empty_node_endpoints_list_as_tansu_sends_it_passes_without_the_walk(no_walk, api_key, version):
    frame = _top_level_tag(plain(api_key, version), 0, EMPTY_ENDPOINTS)
    assert frame.endswith(b"\x01\x00\x01\x01")
    assert rewrite_leader_endpoints(api_key, version, frame, 9, address_of) is frame


def test_the_walk_copies_nothing_when_no_address_changes(monkeypatch):
    calls = _walked(monkeypatch)
    # an empty list next to another tag: the walk's case, the frame itself comes back
    frame = plain_fetch(17)
    body = frame[4:-1] + b"\x02\x00\x01\x01\x05\x01\x07"
    both = len(body).to_bytes(4, "big") + body
    assert rewrite_leader_endpoints(FETCH, 17, both, 9, address_of) is both
    # endpoints already naming the gateway (a rewritten answer): a fixed point, not a copy
    rewritten = rewrite_leader_endpoints(FETCH, 17, moved_fetch(17), 9, address_of)
    assert rewrite_leader_endpoints(FETCH, 17, rewritten, 9, address_of) is rewritten
    assert calls == [17, 17, 17]


def test_fetch_with_aborted_transactions_and_megabyte_records_passes_without_the_walk(no_walk):
    frame = plain_fetch(16, topics=1, partitions=4, record_bytes=400_000, aborted=3)
    assert len(frame) > 3 * 400_000      # records lengths of three varint bytes
    assert rewrite_leader_endpoints(FETCH, 16, frame, 9, address_of) is frame


def _walked(monkeypatch) -> list[int]:
    calls: list[int] = []

    def walk(api_key, version, frame, offset, address_of):
        calls.append(version)
        return walk_leader_endpoints(api_key, version, frame, offset, address_of)
    monkeypatch.setattr(leader_endpoints, "walk_leader_endpoints", walk)
    return calls


@pytest.mark.parametrize("version", [16, 17, 18])
def test_a_moved_partition_goes_to_the_walk_and_its_endpoint_is_rewritten(monkeypatch, version):
    calls = _walked(monkeypatch)
    frame = moved_fetch(version)
    out = rewrite_leader_endpoints(FETCH, version, frame, 9, address_of)
    assert calls == [version]
    assert out != frame and b"gw.example" in out and b"broker-2" not in out


def _top_level_tag(frame: bytes, tag: int, data: bytes) -> bytes:
    """`frame` (top-level tagged section empty) with one top-level tagged field."""
    assert frame[-1] == 0
    body = frame[4:-1] + bytes([1, tag, len(data)]) + data
    return len(body).to_bytes(4, "big") + body


@pytest.mark.parametrize(("api_key", "version"), VERSIONS)
def test_endpoints_with_no_partition_hint_are_still_rewritten(monkeypatch, api_key, version):
    # Kafka pairs NodeEndpoints with a moved partition's CurrentLeader, but the check does not
    # rely on it: a top-level tag 0 alone goes to the walk.
    calls = _walked(monkeypatch)
    endpoint = b"\x02" + (1).to_bytes(4, "big") + b"\x09broker-1" + (9093).to_bytes(4, "big") + b"\x00\x00"
    out = rewrite_leader_endpoints(api_key, version, _top_level_tag(plain(api_key, version), 0, endpoint), 9,
                                   address_of)
    assert calls == [version]
    assert b"gw.example" in out and b"broker-1" not in out


@pytest.mark.parametrize(("api_key", "version"), VERSIONS)
def test_whatever_is_not_the_common_shape_is_left_to_the_walk(monkeypatch, api_key, version):
    calls = _walked(monkeypatch)
    unknown_tag = _top_level_tag(plain(api_key, version), 7, b"\x01\x02")
    assert rewrite_leader_endpoints(api_key, version, unknown_tag, 9, address_of) is unknown_tag
    many = (plain_produce(version, topics=1, partitions=130) if api_key == PRODUCE else
            plain_fetch(version, topics=1, partitions=130, record_bytes=1, aborted=0))   # a two-byte count
    assert rewrite_leader_endpoints(api_key, version, many, 9, address_of) is many
    assert calls == [version, version]


def test_produce_record_errors_and_long_topic_names_are_left_to_the_walk(monkeypatch):
    calls = _walked(monkeypatch)
    long_name = plain_produce(12, topics=1, partitions=1, name="t" * 200)
    assert rewrite_leader_endpoints(PRODUCE, 12, long_name, 9, address_of) is long_name
    m = _module(PRODUCE, 11)
    errors = encode_response_frame(PRODUCE, 11, 7, response_class(PRODUCE, 11)(responses=(m.TopicProduceResponse(
        name=TopicName("t"), partition_responses=(m.PartitionProduceResponse(
            index=i32(0), error_code=ErrorCode.invalid_record, base_offset=i64(-1), error_message="bad",
            record_errors=(m.BatchIndexAndErrorMessage(batch_index=i32(2), batch_index_error_message=None),)),)),),
        throttle_time=ZERO))
    assert rewrite_leader_endpoints(PRODUCE, 11, errors, 9, address_of) is errors
    assert calls == [12, 11]


SEEDS = [plain(k, v) for k, v in VERSIONS] + [plain(k, v, topics=1, partitions=1) for k, v in VERSIONS] + \
        [moved_fetch(v) for v in (16, 17, 18)]
SEED_KEYS = VERSIONS + VERSIONS + [(FETCH, v) for v in (16, 17, 18)]


@pytest.mark.parametrize("index", range(len(SEEDS)))
def test_every_truncation_is_refused_by_the_walk_with_where(index):
    api_key, version = SEED_KEYS[index]
    frame = SEEDS[index]
    for cut in range(9, len(frame)):
        short = (cut - 4).to_bytes(4, "big") + frame[4:cut]
        verdict = outcome(rewrite_leader_endpoints, api_key, version, short)
        assert verdict[0] == "refused" and "of the frame" in verdict[1], (cut, verdict)
        assert verdict == outcome(walk_leader_endpoints, api_key, version, short)


HOSTILE_PATCHES = {
    # (api_key, offset into the body, bytes written there): lengths and counts that lie
    "fetch: records length of five varint bytes": (FETCH, None, b"\xff\xff\xff\xff\x0f"),
    "fetch: records length of six varint bytes": (FETCH, None, b"\xff\xff\xff\xff\xff\x01"),
    "fetch: topics null": (FETCH, 10, b"\x00"),
    "fetch: 126 topics declared": (FETCH, 10, b"\x7f"),
    "fetch: partitions null": (FETCH, 27, b"\x00"),
    "fetch: aborted transactions count past the end": (FETCH, 58, b"\x7f"),
    "produce: topics null": (PRODUCE, 0, b"\x00"),
    "produce: name longer than the frame": (PRODUCE, 1, b"\x7f"),
    "produce: name null": (PRODUCE, 1, b"\x00"),
    "produce: record_errors null": (PRODUCE, 40, b"\x00"),
    "produce: error_message past the end": (PRODUCE, 41, b"\x7e"),
}


@pytest.mark.parametrize("what", HOSTILE_PATCHES)
def test_lying_lengths_and_counts_get_the_walks_verdict(what):
    api_key, at, data = HOSTILE_PATCHES[what]
    version = 12 if api_key == PRODUCE else 16
    frame = plain(api_key, version, topics=1, partitions=1)
    if at is None:    # the records length of the first partition: after its fixed fields
        at = 10 + 1 + 16 + 1 + 30 + 1 + 4
    body = frame[9:9 + at] + data + frame[9 + at + len(data):]
    hostile = (len(body) + 5).to_bytes(4, "big") + frame[4:9] + body
    verdict = outcome(rewrite_leader_endpoints, api_key, version, hostile)
    assert verdict == outcome(walk_leader_endpoints, api_key, version, hostile)
    assert verdict[0] == "refused", verdict


@pytest.mark.parametrize("length", [b"\x80\x00", b"\x81\x00", b"\x80\x80\x00", b"\x81\x80\x80\x00"])
def test_overlong_records_lengths_are_read_as_the_walk_reads_them(length):
    # 0x80 0x00 is a two-byte 0: null records, not a step back (and 0x81 0x00 a two-byte 1).
    frame = plain_fetch(16, topics=1, partitions=1, record_bytes=0)
    at = 9 + 10 + 1 + 16 + 1 + 30 + 1 + 4        # the records length of the only partition
    assert frame[at:at + 2] == b"\x01\x00"       # empty records, then the partition's tags
    hostile = frame[:at] + length + frame[at + 1:]
    hostile = (len(hostile) - 4).to_bytes(4, "big") + hostile[4:]
    verdict = outcome(rewrite_leader_endpoints, FETCH, 16, hostile)
    assert verdict == outcome(walk_leader_endpoints, FETCH, 16, hostile)
    assert verdict[0] == "frame" and verdict[2], verdict      # overlong but well formed: passed as it is
    for cut in range(at, len(hostile)):                      # one byte short: refused, however read
        short = (cut - 4).to_bytes(4, "big") + hostile[4:cut]
        verdict = outcome(rewrite_leader_endpoints, FETCH, 16, short)
        assert verdict[0] == "refused" and verdict == outcome(walk_leader_endpoints, FETCH, 16, short), cut


def test_a_body_offset_at_or_past_the_end_and_trailing_bytes_are_refused():
    for api_key, version in VERSIONS:
        frame = plain(api_key, version)
        for offset in (len(frame), len(frame) + 3):
            verdict = outcome(rewrite_leader_endpoints, api_key, version, frame, offset)
            assert verdict[0] == "refused" and verdict == outcome(walk_leader_endpoints, api_key, version, frame,
                                                                  offset)
        longer = (len(frame) - 3).to_bytes(4, "big") + frame[4:] + b"\x00"
        with pytest.raises(BodyError, match="after the response's tagged fields"):
            rewrite_leader_endpoints(api_key, version, longer, 9, address_of)


def _mutants(rng: random.Random, frame: bytes, n: int):
    for _ in range(n):
        body = bytearray(frame[9:])
        for _ in range(rng.randint(1, 3)):
            kind = rng.random()
            at = rng.randrange(len(body) + 1)
            if kind < 0.5 and body:
                body[min(at, len(body) - 1)] = rng.choice((0, 1, 2, 0x7F, 0x80, 0xFF, rng.randrange(256)))
            elif kind < 0.75:
                body[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
            else:
                del body[at:at + rng.randint(1, 4)]
        yield (len(body) + 5).to_bytes(4, "big") + frame[4:9] + bytes(body)


def test_on_mutated_answers_the_fast_check_never_changes_the_outcome():
    # The property the fuzz harness (fuzz/atheris_endpoints.py) checks at length: the fast
    # check only ever passes what the walk passes unchanged; otherwise the walk decides.
    rng = random.Random(951)
    fast_passes = 0
    for index, seed in enumerate(SEEDS):
        api_key, version = SEED_KEYS[index]
        for frame in _mutants(rng, seed, 300):
            fast = outcome(rewrite_leader_endpoints, api_key, version, frame)
            assert fast == outcome(walk_leader_endpoints, api_key, version, frame), frame.hex()
            fast_passes += fast[0] == "frame" and fast[2]
    assert fast_passes > 100     # the mutants reach both sides of the check


def test_body_offset_is_the_headers_end():
    frame = plain_fetch(16)
    assert body_offset(frame, 1) == 9 == decode_response_header(frame, 1)[1]
    assert body_offset(frame, 0) == 8
    tagged = frame[:8] + b"\x01\x05\x02ab" + frame[9:]
    assert body_offset(tagged, 1) == decode_response_header(tagged, 1)[1] == 13
    with pytest.raises(HeaderError):
        body_offset(frame[:8], 1)


def test_the_forward_link_passes_the_common_answer_and_closes_on_a_truncated_one():
    route = build_routes({FETCH: (4, 16)}, ())[route_key(FETCH, 16)]
    client = _Client()
    link = UpstreamLink(client, gateway=None)  # type: ignore[arg-type]
    link._gateway = types.SimpleNamespace(address_of=address_of)  # type: ignore[assignment]
    good, bad = Pending(7, route), Pending(7, route)
    link.waiting.extend((good, bad))
    frame = plain_fetch(16)
    link.data_received(frame)
    assert good.data == frame and not client.failures
    link.data_received((len(frame) - 6).to_bytes(4, "big") + frame[4:-2])
    assert bad.data is None
    assert client.failures and "fetch v16 response from upstream" in client.failures[0]
