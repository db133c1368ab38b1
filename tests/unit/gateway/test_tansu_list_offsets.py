"""ListOffsets LATEST in front of Tansu: which requests take a Fetch along, what the Fetch
asks, and how its answer corrects the listing (coordinator/gateway/tansu_list_offsets.py)."""
from __future__ import annotations

import struct
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from coordinator.gateway.forward import Pending, UpstreamLink
from coordinator.gateway.routes import FORWARD_LATEST, build_routes, route_key
from coordinator.gateway.tansu_list_offsets import (
    HighWatermarkPending,
    LatestPending,
    fetch_frame,
    latest_request,
)
from coordinator.protocol.apis import FETCH, LIST_OFFSETS, request_class, response_class
from coordinator.protocol.codec import decode_body, decode_response_frame, encode_response_frame
from coordinator.protocol.framing import decode_request_header
from support.raw_client import encode_request, request_types

ROUTES = build_routes({LIST_OFFSETS: (1, 9)}, ())   # kio (so kcoord) has no v0
FETCH_TYPES: Any = __import__(response_class(FETCH, 4).__module__, fromlist=["x"])


def route(version: int) -> Any:
    return ROUTES[route_key(LIST_OFFSETS, version)]


def list_request(version: int, asks: dict[str, dict[int, int]], isolation_level: int = 0,
                 correlation_id: int = 7) -> bytes:
    types = request_types(LIST_OFFSETS, version)
    topics = tuple(types.ListOffsetsTopic(name=name, partitions=tuple(
        types.ListOffsetsPartition(partition_index=p, timestamp=t) for p, t in parts.items()))
        for name, parts in asks.items())
    fields: dict[str, Any] = {"replica_id": -1, "topics": topics}
    if version >= 2:
        fields["isolation_level"] = isolation_level
    return encode_request(LIST_OFFSETS, version, correlation_id, request_class(LIST_OFFSETS, version)(**fields))


def list_answer(version: int, answers: dict[str, dict[int, tuple[int, int]]], correlation_id: int = 7,
                throttle_ms: int = 0) -> bytes:
    """answers: topic -> partition -> (error code, offset)."""
    types: Any = __import__(response_class(LIST_OFFSETS, version).__module__, fromlist=["x"])
    topics = tuple(types.ListOffsetsTopicResponse(name=name, partitions=tuple(
        types.ListOffsetsPartitionResponse(partition_index=p, error_code=ErrorCode(e), timestamp=-1, offset=o)
        for p, (e, o) in parts.items())) for name, parts in answers.items())
    fields: dict[str, Any] = {"topics": topics}
    if version >= 2:
        fields["throttle_time"] = timedelta(milliseconds=throttle_ms)
    return encode_response_frame(LIST_OFFSETS, version, correlation_id,
                                 response_class(LIST_OFFSETS, version)(**fields))


def fetch_answer(ends: dict[str, dict[int, tuple[int, int, int]]], correlation_id: int = 7) -> bytes:
    """ends: topic -> partition -> (error code, high watermark, last stable offset)."""
    types = FETCH_TYPES
    return encode_response_frame(FETCH, 4, correlation_id, response_class(FETCH, 4)(throttle_time=timedelta(0), responses=tuple(
        types.FetchableTopicResponse(topic=name, partitions=tuple(
            types.PartitionData(partition_index=p, error_code=ErrorCode(e), high_watermark=hw, last_stable_offset=lso,
                                aborted_transactions=(), records=None)
            for p, (e, hw, lso) in parts.items())) for name, parts in ends.items())))


def offsets(version: int, frame: bytes) -> dict[tuple[str, int], tuple[int, int]]:
    _, response = decode_response_frame(LIST_OFFSETS, version, frame)
    return {(t.name, p.partition_index): (p.error_code, p.offset) for t in response.topics for p in t.partitions}


def prepared(version: int, frame: bytes) -> tuple[LatestPending, bytes, HighWatermarkPending] | None:
    _, offset = decode_request_header(frame, route(version).request_header_version)
    return latest_request(route(version), frame, offset, 7)


class FakeClient:
    def __init__(self) -> None:
        self.failures: list[str] = []
        self.released = 0

    def answered(self, size: int) -> None:
        self.released += size

    def flush(self) -> None:
        pass

    def upstream_failed(self, reason: str) -> None:
        self.failures.append(reason)


def answered(version: int, request: bytes, listed: bytes, fetched: bytes, after: Pending | None = None) -> bytes:
    """What the client gets: the link given upstream's ListOffsets answer, [an answer to
    ``after``,] then the Fetch's."""
    found = prepared(version, request)
    assert found is not None
    pending, _, fetch_pending = found
    client = FakeClient()
    link = UpstreamLink(client, gateway=None)  # type: ignore[arg-type]
    link.waiting.append(pending)
    if after is not None:
        link.waiting.append(after)
    link.waiting.append(fetch_pending)
    link.data_received(listed)
    assert pending.data is None and pending.listed == listed   # held for the Fetch
    size = pending.size
    assert client.released == 0
    if after is not None:
        link.data_received(struct.pack(">ii", 5, after.correlation_id) + b"\x00")
        assert after.data is not None and pending.data is None
    link.data_received(fetched)
    assert pending.data is not None and not link.waiting and not client.failures
    assert client.released == size > 0 and pending.size == 0    # out of the process-wide queue once
    return pending.data


def test_list_offsets_routes_have_their_kind() -> None:
    assert {r.kind for r in ROUTES.values()} == {FORWARD_LATEST}


@pytest.mark.parametrize("timestamp", [-2, -3, -4, -5, 0, 1_700_000_000_000])
def test_only_latest_takes_a_fetch(timestamp: int) -> None:
    assert prepared(7, list_request(7, {"t": {0: timestamp}})) is None


@pytest.mark.parametrize("isolation_level", [-1, 2, 127])
def test_an_unknown_isolation_level_takes_no_fetch(isolation_level: int) -> None:
    # Tansu closes the connection on a Fetch with such an isolation level: the client's own
    # request goes up alone and gets whatever upstream answers it.
    assert prepared(7, list_request(7, {"t": {0: -1}}, isolation_level=isolation_level)) is None


def test_the_fetch_names_only_partitions_asked_latest_with_the_isolation_level() -> None:
    found = prepared(7, list_request(7, {"a": {0: -1, 1: -2, 2: -1}, "b": {0: 5}}, isolation_level=1))
    assert found is not None
    pending, fetch, _ = found
    header, offset = decode_request_header(fetch, 1)
    assert (header.api_key, header.api_version, header.correlation_id) == (FETCH, 4, 7)
    body = decode_body(request_class(FETCH, 4), fetch, offset)
    assert body.max_bytes == 0 and body.min_bytes == 0 and body.isolation_level == 1
    assert body.max_wait.total_seconds() > 0    # Tansu answers max_wait 0 with no partitions
    assert [(t.topic, [p.partition for p in t.partitions]) for t in body.topics] == [("a", [0, 2])]
    assert pending.size == len(list_request(7, {"a": {0: -1, 1: -2, 2: -1}, "b": {0: 5}}, 1)) + len(fetch)


def test_latest_becomes_the_high_watermark_and_nothing_else_changes() -> None:
    request = list_request(7, {"t": {0: -1, 1: -1, 2: -2, 3: -1}})
    listed = list_answer(7, {"t": {0: (0, 11), 1: (0, 4), 2: (0, 0), 3: (3, -1)}})
    fetched = fetch_answer({"t": {0: (0, 15, 15), 1: (0, 4, 4), 2: (0, 99, 99), 3: (0, 50, 50)}})
    got = offsets(7, answered(7, request, listed, fetched))
    # 0: raised; 1: already the HW; 2: EARLIEST untouched; 3: upstream's error stands.
    assert got == {("t", 0): (0, 15), ("t", 1): (0, 4), ("t", 2): (0, 0), ("t", 3): (3, -1)}


def test_answers_keep_their_order_behind_the_fetch() -> None:
    request = list_request(1, {"t": {0: -1}})
    other = Pending(8, route(1))
    got = answered(1, request, list_answer(1, {"t": {0: (0, 11)}}), fetch_answer({"t": {0: (0, 15, 15)}}), other)
    assert offsets(1, got) == {("t", 0): (0, 15)}


def test_read_committed_takes_the_last_stable_offset() -> None:
    request = list_request(9, {"t": {0: -1}}, isolation_level=1)
    got = answered(9, request, list_answer(9, {"t": {0: (0, 11)}}), fetch_answer({"t": {0: (0, 15, 13)}}))
    assert offsets(9, got) == {("t", 0): (0, 13)}


def test_never_below_what_upstream_listed() -> None:
    # Tansu answers HW 0 without error for a partition it does not have.
    request = list_request(7, {"t": {0: -1}})
    listed = list_answer(7, {"t": {0: (0, 11)}})
    assert answered(7, request, listed, fetch_answer({"t": {0: (0, 0, 0)}})) == listed


@pytest.mark.parametrize("fetched", [
    fetch_answer({"t": {0: (6, -1, -1)}}),        # NOT_LEADER_OR_FOLLOWER
    fetch_answer({"other": {0: (0, 15, 15)}}),   # the partition missing
    struct.pack(">ii", 7, 7) + b"\xff\xff\xff",  # does not decode
], ids=["partition error", "partition missing", "undecodable"])
def test_a_failed_fetch_answers_what_upstream_listed(fetched: bytes) -> None:
    request = list_request(7, {"t": {0: -1}})
    listed = list_answer(7, {"t": {0: (0, 11)}})
    assert answered(7, request, listed, fetched) == listed


def test_fetch_frame_dedupes_partitions() -> None:
    frame = fetch_frame({"t": {2, 0, 1}}, 0, 3)
    header, offset = decode_request_header(frame, 1)
    body = decode_body(request_class(FETCH, 4), frame, offset)
    assert [p.partition for p in body.topics[0].partitions] == [0, 1, 2]
