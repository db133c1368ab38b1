"""In front of Tansu, ListOffsets LATEST answers the high watermark, as Kafka does.

Why (docs/design/streams-groups.md, "Tansu's ListOffsets LATEST: the evidence"): Tansu 0.6
lists LATEST (timestamp -1) as its last batch's base offset + 1, where Kafka lists the high
watermark (read_uncommitted) or the last stable offset (read_committed). A Streams task that
restores its changelog to the listed end stops short of the last batch's records.

Rules:
- Only in front of a broker that is not Apache Kafka (upstream_facts.is_kafka false); in front
  of Kafka, ListOffsets goes up and comes back byte for byte with no extra request.
- Only ListOffsets requests with at least one partition asked LATEST (-1) (kcoord routes v1+)
  and isolation level 0 or 1 (Tansu closes the connection on a Fetch of any other: measured);
  EARLIEST (-2), MAX_TIMESTAMP (-3), -4, -5 and timestamps are answered as upstream answers them.
- The high watermarks come from one Fetch v4 sent on the client's own upstream link, right
  behind its ListOffsets in the same write: the same broker and the same principal, and no
  extra round trip. It names only the partitions the client asked LATEST, with the client's
  isolation level, max_wait 1 ms (Tansu answers a max_wait of 0 with no partitions at all),
  min_bytes 0 and max_bytes 0 (Tansu ignores partition_max_bytes but honours max_bytes: no
  records come back). Measured on Tansu 0.6 in the same docs section.
- A partition's offset is corrected only if upstream answered it in ListOffsets without error
  (so the answer never holds an offset of a partition the ListOffsets was not answered for)
  and the Fetch answered it without error: it becomes max(listed, high watermark), or the
  last stable offset under read_committed. The Fetch is read after the listing, so that is
  never above the high watermark the Fetch read, never below what Tansu listed (Tansu
  answers HW 0 without error for a partition it does not have: the max keeps the listing).
- The Fetch failing (a partition's error, a partition missing, an answer that does not
  decode) never fails the client's request: the listed offset is answered, and counted
  (kcoord_gateway_list_offsets_latest_total{outcome="kept"}).
- Bounds: one Fetch per client ListOffsets, its bytes counted in that request's place in
  the process-wide queue; it holds no place in the client's answer queue, so a connection
  has at most max_inflight of them upstream, as it has of ListOffsets.
"""
from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from ..metrics import GATEWAY_LATEST_CORRECTIONS
from ..protocol.apis import (
    FETCH,
    LIST_OFFSETS,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)
from ..protocol.codec import BodyError, decode_body, decode_response_frame, encode_body, encode_response_frame
from ..protocol.framing import SIZE, HeaderError, RequestHeader, decode_response_header
from .forward import Pending
from .routes import Route

LATEST = -1
READ_COMMITTED = 1
FETCH_VERSION = 4          # topic names, isolation level, last stable offset; every Tansu has it
CLIENT_ID = "kcoord-list-offsets-latest"
_FETCH = request_class(FETCH, FETCH_VERSION)
_FETCH_TYPES: Any = __import__(_FETCH.__module__, fromlist=["FetchTopic"])
_FETCH_RESPONSE = response_class(FETCH, FETCH_VERSION)
_FETCH_HEADER_VERSION = request_header_version(FETCH, FETCH_VERSION)
_FETCH_RESPONSE_HEADER_VERSION = response_header_version(FETCH, FETCH_VERSION)

_RAISED = GATEWAY_LATEST_CORRECTIONS.labels(outcome="raised")
_SAME = GATEWAY_LATEST_CORRECTIONS.labels(outcome="same")
_KEPT = GATEWAY_LATEST_CORRECTIONS.labels(outcome="kept")

Asked = dict[str, set[int]]      # topic -> partitions asked LATEST


def latest_asked(route: Route, frame: bytes, offset: int) -> tuple[Asked, int] | None:
    """The partitions a ListOffsets request asks LATEST, and its isolation level; None when
    there are none (or the body does not decode: forwarded as it is)."""
    try:
        request = decode_body(request_class(LIST_OFFSETS, route.api_version), frame, offset)
    except (BodyError, ValueError):
        return None
    asked: Asked = {}
    for topic in request.topics:
        for partition in topic.partitions:
            if partition.timestamp == LATEST:
                asked.setdefault(topic.name, set()).add(partition.partition_index)
    isolation_level = int(getattr(request, "isolation_level", 0))
    if not asked or isolation_level not in (0, READ_COMMITTED):
        return None       # Tansu closes the connection on a Fetch of another isolation level
    return asked, isolation_level


def fetch_frame(asked: Asked, isolation_level: int, correlation_id: int) -> bytes:
    """The Fetch v4 that reads the high watermark of every partition in ``asked``."""
    types = _FETCH_TYPES
    body = encode_body(_FETCH(
        replica_id=-1, max_wait=timedelta(milliseconds=1), min_bytes=0, max_bytes=0,
        isolation_level=isolation_level,
        topics=tuple(types.FetchTopic(topic=name, partitions=tuple(
            types.FetchPartition(partition=index, fetch_offset=0, partition_max_bytes=0)
            for index in sorted(indexes))) for name, indexes in asked.items())))
    payload = RequestHeader(FETCH, FETCH_VERSION, correlation_id, CLIENT_ID).encode(_FETCH_HEADER_VERSION) + body
    return SIZE.pack(len(payload)) + payload


def end_offsets(fetch_answer: bytes, isolation_level: int) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the end offset a Fetch v4 answer gives (high watermark, or last
    stable offset under read_committed) for each partition it answered without error; empty
    if the answer does not decode."""
    try:
        _, offset = decode_response_header(fetch_answer, _FETCH_RESPONSE_HEADER_VERSION)
        response = decode_body(_FETCH_RESPONSE, fetch_answer, offset)
    except (BodyError, HeaderError, ValueError):
        return {}
    ends: dict[tuple[str, int], int] = {}
    for topic in response.responses:
        for partition in topic.partitions:
            end = (partition.last_stable_offset if isolation_level == READ_COMMITTED
                   else partition.high_watermark)
            if partition.error_code == 0 and end >= 0:
                ends.setdefault((topic.topic, partition.partition_index), end)
    return ends


def corrected(route: Route, listed: bytes, asked: Asked, ends: dict[tuple[str, int], int]) -> bytes:
    """Upstream's ListOffsets answer ``listed`` with each partition asked LATEST and answered
    without error raised to its end offset in ``ends`` (never lowered); ``listed`` itself
    when nothing changes or it does not decode."""
    try:
        correlation_id, response = decode_response_frame(LIST_OFFSETS, route.api_version, listed)
    except (BodyError, HeaderError, ValueError):
        return listed
    changed = False
    topics = []
    for topic in response.topics:
        indexes = asked.get(topic.name)
        partitions = []
        for partition in topic.partitions:
            if indexes is not None and partition.partition_index in indexes and partition.error_code == 0:
                end = ends.get((topic.name, partition.partition_index))
                if end is None:
                    _KEPT.inc()
                elif end > partition.offset:
                    _RAISED.inc()
                    partition = dataclasses.replace(partition, offset=end)
                    changed = True
                else:
                    _SAME.inc()
            partitions.append(partition)
        topics.append(dataclasses.replace(topic, partitions=tuple(partitions)))
    if not changed:
        return listed
    return encode_response_frame(LIST_OFFSETS, route.api_version, correlation_id,
                                 dataclasses.replace(response, topics=tuple(topics)))


class LatestPending(Pending):
    """A client's ListOffsets asking LATEST: upstream's answer waits here (``listed``) for the
    Fetch behind it, then the corrected answer is the client's."""

    __slots__ = ("asked", "isolation_level", "listed")

    def __init__(self, correlation_id: int, route: Route, size: int, asked: Asked, isolation_level: int) -> None:
        super().__init__(correlation_id, route, size)
        self.asked = asked
        self.isolation_level = isolation_level
        self.listed: bytes | None = None

    def completed(self, frame: bytes) -> None:
        """Upstream's ListOffsets answer: kept until the Fetch's comes."""
        self.listed = frame


class HighWatermarkPending(Pending):
    """The Fetch sent behind a LatestPending; in the link's waiting list only."""

    __slots__ = ("target",)
    to_client = False       # its answer is kcoord's own, not the client's (forward.py's byte count)

    def __init__(self, target: LatestPending) -> None:
        super().__init__(target.correlation_id, target.route)
        self.target = target

    def completed(self, frame: bytes) -> tuple[Pending, bytes]:
        """The Fetch's answer: (the ListOffsets slot, its answer for the client)."""
        target = self.target
        listed = target.listed
        if listed is None:    # the link answers in order: the ListOffsets answer came first
            raise ValueError("the Fetch for ListOffsets LATEST was answered before the ListOffsets")
        return target, corrected(target.route, listed, target.asked,
                                 end_offsets(frame, target.isolation_level))


def latest_request(route: Route, frame: bytes, offset: int,
                   correlation_id: int) -> tuple[LatestPending, bytes, HighWatermarkPending] | None:
    """For a ListOffsets asking LATEST: its slot, the Fetch to send behind it and the
    Fetch's slot; None to forward it as any other request."""
    found = latest_asked(route, frame, offset)
    if found is None:
        return None
    asked, isolation_level = found
    fetch = fetch_frame(asked, isolation_level, correlation_id)
    pending = LatestPending(correlation_id, route, len(frame) + len(fetch), asked, isolation_level)
    return pending, fetch, HighWatermarkPending(pending)
