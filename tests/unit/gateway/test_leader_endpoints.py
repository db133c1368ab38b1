"""KIP-951 NodeEndpoints in forwarded Produce (v10+) and Fetch (v16+) responses become the
gateway's addresses (coordinator/gateway/leader_endpoints.py); everything else in the answer is
unchanged, answers without endpoints pass as they are, and a malformed answer is refused
with where it broke."""
from __future__ import annotations

import dataclasses
import datetime
import importlib
import types
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from coordinator.gateway.forward import Pending, UpstreamLink
from coordinator.gateway.leader_endpoints import (
    carries_endpoints,
    forwarded_versions,
    rewrite_leader_endpoints,
)
from coordinator.gateway.routes import build_routes, route_key
from coordinator.protocol.apis import FETCH, METADATA, PRODUCE, response_class
from coordinator.protocol.codec import BodyError, decode_response_frame, encode_response_frame
from coordinator.protocol.framing import decode_response_header

ZERO = i32Timedelta.parse(datetime.timedelta(0))
GATEWAY = {1: ("gw.example", 19001), 2: ("gw.example", 19002)}


def address_of(node_id: int, host: str, port: int) -> tuple[str, int]:
    assert host.startswith("broker-") and port == 9092 + node_id, "the upstream address is passed on"
    return GATEWAY[node_id]


def _module(api_key: int, version: int):
    return importlib.import_module(response_class(api_key, version).__module__)


def produce_response(version: int, endpoints: bool):
    m = _module(PRODUCE, version)
    topic = {"topic_id": uuid.UUID(int=7)} if version >= 13 else {"name": TopicName("orders")}
    moved = m.PartitionProduceResponse(index=i32(1), error_code=ErrorCode.not_leader_or_follower,
                                       base_offset=i64(-1), record_errors=(), error_message="moved",
                                       current_leader=m.LeaderIdAndEpoch(leader_id=BrokerId(2), leader_epoch=i32(5)))
    ok = m.PartitionProduceResponse(index=i32(0), error_code=ErrorCode.none, base_offset=i64(42),
                                    record_errors=(m.BatchIndexAndErrorMessage(batch_index=i32(3),
                                                                               batch_index_error_message="x"),),
                                    error_message=None)
    nodes = (m.NodeEndpoint(node_id=BrokerId(2), host="broker-2", port=i32(9094), rack="r2"),
             m.NodeEndpoint(node_id=BrokerId(1), host="broker-1", port=i32(9093), rack=None)) if endpoints else ()
    return response_class(PRODUCE, version)(
        responses=(m.TopicProduceResponse(**topic, partition_responses=(ok, moved)),),
        throttle_time=ZERO, node_endpoints=nodes)


def fetch_response(version: int, endpoints: bool):
    m = _module(FETCH, version)
    data = m.PartitionData(partition_index=i32(0), error_code=ErrorCode.none, high_watermark=i64(10),
                           last_stable_offset=i64(9), log_start_offset=i64(0),
                           aborted_transactions=(m.AbortedTransaction(producer_id=ProducerId(4), first_offset=i64(3)),),
                           preferred_read_replica=BrokerId(-1), records=b"\x00" * 300)
    moved = m.PartitionData(partition_index=i32(1), error_code=ErrorCode.not_leader_or_follower,
                            high_watermark=i64(-1), aborted_transactions=None, records=None,
                            current_leader=m.LeaderIdAndEpoch(leader_id=BrokerId(2), leader_epoch=i32(8)))
    nodes = (m.NodeEndpoint(node_id=BrokerId(2), host="broker-2", port=i32(9094), rack=None),) if endpoints else ()
    return response_class(FETCH, version)(
        throttle_time=ZERO, error_code=ErrorCode.none, session_id=i32(77),
        responses=(m.FetchableTopicResponse(topic_id=uuid.UUID(int=9), partitions=(data, moved)),),
        node_endpoints=nodes)


CASES = [(PRODUCE, v, produce_response) for v in (10, 11, 12, 13)] + \
        [(FETCH, v, fetch_response) for v in (16, 17, 18)]


def _rewrite(api_key: int, version: int, frame: bytes) -> bytes:
    _, offset = decode_response_header(frame, 1)
    return rewrite_leader_endpoints(api_key, version, frame, offset, address_of)


@pytest.mark.parametrize(("api_key", "version", "build"), CASES)
def test_node_endpoints_get_the_gateway_addresses_and_nothing_else_changes(api_key, version, build):
    original = build(version, endpoints=True)
    frame = encode_response_frame(api_key, version, 31, original)
    correlation_id, rewritten = decode_response_frame(api_key, version, _rewrite(api_key, version, frame))
    assert correlation_id == 31
    assert [(n.node_id, n.host, n.port, n.rack) for n in rewritten.node_endpoints] == [
        (n.node_id, *GATEWAY[n.node_id], n.rack) for n in original.node_endpoints]
    assert dataclasses.replace(rewritten, node_endpoints=original.node_endpoints) == original


@pytest.mark.parametrize(("api_key", "version", "build"), CASES)
def test_an_answer_without_endpoints_passes_as_it_is(api_key, version, build):
    frame = encode_response_frame(api_key, version, 8, build(version, endpoints=False))
    assert _rewrite(api_key, version, frame) is frame


@pytest.mark.parametrize(("api_key", "version", "build"), CASES)
def test_every_truncation_and_trailing_garbage_is_refused_with_where(api_key, version, build):
    frame = encode_response_frame(api_key, version, 8, build(version, endpoints=True))
    _, body = decode_response_header(frame, 1)
    for cut in range(body, len(frame)):
        short = (cut - 4).to_bytes(4, "big") + frame[4:cut]
        with pytest.raises(BodyError, match=r"at byte \d+ of the frame"):
            _rewrite(api_key, version, short)
    with pytest.raises(BodyError, match="after the response's tagged fields"):
        _rewrite(api_key, version, frame + b"\x00")


def test_a_huge_declared_count_is_refused_before_any_element_is_read():
    frame = encode_response_frame(PRODUCE, 12, 1, produce_response(12, endpoints=False))
    _, body = decode_response_header(frame, 1)
    hostile = frame[:body] + b"\xff\xff\xff\xff\x07" + frame[body + 1:]
    with pytest.raises(BodyError, match="elements declared"):
        _rewrite(PRODUCE, 12, hostile)


def test_which_versions_carry_endpoints_and_which_are_forwarded():
    assert [v for v in range(3, 14) if carries_endpoints(PRODUCE, v)] == [10, 11, 12, 13]
    assert [v for v in range(4, 19) if carries_endpoints(FETCH, v)] == [16, 17, 18]
    assert not carries_endpoints(METADATA, 12)
    upstream = {PRODUCE: (0, 12), FETCH: (0, 17), METADATA: (0, 12)}
    lifted = forwarded_versions({PRODUCE: (3, 9), FETCH: (4, 15), METADATA: (0, 12)}, upstream)
    assert lifted == {PRODUCE: (3, 12), FETCH: (4, 17), METADATA: (0, 12)}
    assert forwarded_versions({METADATA: (0, 12)}, upstream) == {METADATA: (0, 12)}   # not advertised: stays so
    routes = build_routes(lifted, ())
    assert [v for v in range(3, 13) if routes[route_key(PRODUCE, v)].endpoints] == [10, 11, 12]
    assert not routes[route_key(METADATA, 12)].endpoints


class _Client:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def flush(self) -> None:
        pass

    def upstream_failed(self, reason: str) -> None:
        self.failures.append(reason)


def test_the_forward_link_rewrites_on_the_way_back_and_closes_on_a_bad_answer():
    routes = build_routes({PRODUCE: (3, 12)}, ())
    route = routes[route_key(PRODUCE, 12)]
    client = _Client()
    link = UpstreamLink(client, gateway=None)  # type: ignore[arg-type]
    link._gateway = types.SimpleNamespace(address_of=address_of)  # type: ignore[assignment]
    good, bad = Pending(1, route), Pending(2, route)
    link.waiting.extend((good, bad))
    frame = encode_response_frame(PRODUCE, 12, 1, produce_response(12, endpoints=True))
    link.data_received(frame)
    assert good.data is not None
    assert {(n.host, n.port) for n in decode_response_frame(PRODUCE, 12, good.data)[1].node_endpoints} == \
        set(GATEWAY.values())
    broken = encode_response_frame(PRODUCE, 12, 2, produce_response(12, endpoints=True))
    link.data_received((len(broken) - 5).to_bytes(4, "big") + broken[4:-1])
    assert bad.data is None
    assert client.failures and "produce v12 response from upstream" in client.failures[0]
    assert "needs 41 bytes, 40 left" in client.failures[0]


def _with_endpoints_data(data: bytes) -> bytes:
    """A Produce v12 answer for no topics whose tag 0 holds ``data``."""
    body = b"\x01" + b"\x00\x00\x00\x00" + b"\x01\x00" + bytes([len(data)]) + data
    return (len(body) + 5).to_bytes(4, "big") + (3).to_bytes(4, "big") + b"\x00" + body


def test_a_bad_endpoint_inside_a_well_sized_tag_is_refused_with_its_frame_offset():
    node = (1).to_bytes(4, "big")
    port = (9093).to_bytes(4, "big")
    good = b"\x02" + node + b"\x09broker-1" + port + b"\x00" + b"\x00"
    assert decode_response_frame(PRODUCE, 12, _rewrite(PRODUCE, 12, _with_endpoints_data(good)))[1] \
        .node_endpoints[0].host == "gw.example"
    with pytest.raises(BodyError, match="1 bytes after the last endpoint at byte 37 of the frame"):
        _rewrite(PRODUCE, 12, _with_endpoints_data(good + b"\x00"))
    with pytest.raises(BodyError, match="host: not UTF-8"):
        _rewrite(PRODUCE, 12, _with_endpoints_data(b"\x02" + node + b"\x02\xff" + port + b"\x00\x00"))
    with pytest.raises(BodyError, match="host: non-nullable string serialized as null"):
        _rewrite(PRODUCE, 12, _with_endpoints_data(b"\x02" + node + b"\x00" + port + b"\x00\x00"))
