"""In-process coverage-guided fuzzing of the held ListOffsets path with atheris: the upstream's
answers a held ListOffsets decodes (coordinator/gateway/list_offsets_hold.py).

    .venv/bin/python fuzz/atheris_list_offsets_hold.py -runs=500000 -rss_limit_mb=2048 \
        -malloc_limit_mb=1024 -artifact_prefix=/tmp/

The upstream is hostile too. Each input picks a ListOffsets version (1-11) and which answer
is hostile: the first (the one checked for a fresh topic's missing log) or a retry's. The
answer is a valid one with a slice replaced by the fuzzer's bytes, or the fuzzer's bytes as a
whole body, framed with the right size and correlation id. It goes through the real
UpstreamLink (data_received) to a HoldablePending on an in-memory transport; a retry is sent
at once (no 25 ms wait) and its answer comes from the input.

Invariants (a violation raises AssertionError, a crash):
- nothing escapes data_received, and a well-framed answer never breaks the link;
- a first answer is either released byte for byte or held; held only if it decodes, carries
  no throttle and names a fresh topic's partition the client asked (within the topic's
  partition count) with NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION, and held for
  those only;
- a retry is the client's request (its version and header) reduced to the held partitions;
- a retry's answer that does not decode releases the first answer unchanged; otherwise the
  released answer has the first answer's partitions, each the first's or a retried one
  answered with another code, and the larger throttle of the two; a chain still holding has
  its next retry armed, and a retry answered with a throttle holds no more;
- closing the link cancels the chain: nothing held, nothing armed.
An allocation past -malloc_limit_mb (kio allocates whatever a length claims) is a crash too.
"""
from __future__ import annotations

import asyncio
import struct
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kio.schema.errors import ErrorCode  # noqa: E402

from fuzz.instrumented import atheris, instrumented  # noqa: E402

# Without atheris `one` is also driven by tests/unit/gateway/test_list_offsets_hold_fuzz.py.
with instrumented():
    from coordinator.gateway.forward import UpstreamLink  # noqa: E402
    from coordinator.gateway.fresh_topics import FreshTopics  # noqa: E402
    from coordinator.gateway.list_offsets_hold import HELD_ERRORS, HoldablePending  # noqa: E402
    from coordinator.gateway.routes import build_routes, route_key  # noqa: E402
    from coordinator.protocol.apis import LIST_OFFSETS, request_class, response_class  # noqa: E402
    from coordinator.protocol.codec import (  # noqa: E402
        BodyError,
        decode_body,
        decode_response_frame,
        encode_body,
        encode_response_frame,
    )
    from coordinator.protocol.framing import HeaderError, RequestHeader, decode_request_header, response_frame  # noqa: E402

VERSIONS = tuple(range(1, 12))
ROUTES = build_routes({LIST_OFFSETS: (1, 11)}, ())
CORRELATION_ID = 7
NLOF = int(ErrorCode.not_leader_or_follower)
UNKNOWN = int(ErrorCode.unknown_topic_or_partition)
FRESH = "fresh-changelog"
FRESH_PARTITIONS = 2            # the client asks one index more: never held
ASKED = {FRESH: (0, 1, 2), "other": (0,)}


def _route(version: int) -> Any:
    return ROUTES[route_key(LIST_OFFSETS, version)]


def _request(version: int) -> bytes:
    types: Any = __import__(request_class(LIST_OFFSETS, version).__module__, fromlist=["x"])
    fields: dict[str, Any] = {"replica_id": -1, "topics": tuple(types.ListOffsetsTopic(name=name, partitions=tuple(
        types.ListOffsetsPartition(partition_index=p, timestamp=-1,
                                   **({"current_leader_epoch": -1} if version >= 4 else {})) for p in parts))
        for name, parts in ASKED.items())}
    if version >= 2:
        fields["isolation_level"] = 0
    if version >= 10:
        fields["timeout"] = timedelta(seconds=30)
    route = _route(version)
    body = encode_body(request_class(LIST_OFFSETS, version)(**fields))
    payload = RequestHeader(LIST_OFFSETS, version, CORRELATION_ID, "fuzz").encode(route.request_header_version) + body
    return struct.pack(">i", len(payload)) + payload


def _answer(version: int, errors: dict[str, dict[int, int]]) -> bytes:
    types: Any = __import__(response_class(LIST_OFFSETS, version).__module__, fromlist=["x"])
    topics = tuple(types.ListOffsetsTopicResponse(name=name, partitions=tuple(
        types.ListOffsetsPartitionResponse(partition_index=p, error_code=ErrorCode(e), timestamp=-1,
                                           offset=-1 if e else 5) for p, e in parts.items()))
        for name, parts in errors.items())
    fields: dict[str, Any] = {"topics": topics}
    if version >= 2:
        fields["throttle_time"] = timedelta(0)
    return encode_response_frame(LIST_OFFSETS, version, CORRELATION_ID,
                                 response_class(LIST_OFFSETS, version)(**fields))


REQUESTS = {v: _request(v) for v in VERSIONS}
FIRST = {v: _answer(v, {FRESH: {0: NLOF, 1: NLOF, 2: UNKNOWN}, "other": {0: NLOF}}) for v in VERSIONS}
RETRIED = {v: _answer(v, {FRESH: {0: 0, 1: NLOF}}) for v in VERSIONS}


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class _Client:
    listener_name = "fuzz"
    held = 0
    held_soft_limit = 1 << 30

    def __init__(self) -> None:
        self.failures: list[str] = []

    def answered(self, size: int) -> None:
        pass

    def flush(self) -> None:
        pass

    def head_is_local(self) -> bool:
        return False

    def upstream_failed(self, reason: str) -> None:
        self.failures.append(reason)


class _Gateway:
    limits = None


def _hostile(valid: bytes, version: int, rest: bytes, whole: bool) -> bytes:
    """``valid`` with a slice of its body replaced by ``rest`` (or ``rest`` as the whole body),
    framed with the right size and correlation id."""
    header = 4 + (5 if _route(version).response_header_version else 4)
    if whole:
        body = rest
    else:
        at = header + (int.from_bytes(rest[:2], "big") % (len(valid) - header) if len(rest) >= 2 else 0)
        cut = rest[2] if len(rest) >= 3 else 0
        body = valid[header:at] + rest[3:] + valid[at + cut:]
    return response_frame(CORRELATION_ID, body, _route(version).response_header_version)


def _entries(version: int, frame: bytes) -> list[tuple[tuple[str, int], Any]] | None:
    """Every (topic, partition) entry of a ListOffsets answer, in order (a hostile upstream may
    name one twice); None if it does not decode."""
    try:
        _, response = decode_response_frame(LIST_OFFSETS, version, frame)
    except (BodyError, HeaderError, ValueError):
        return None
    return [((t.name, p.partition_index), p) for t in response.topics for p in t.partitions]


def _throttle(version: int, frame: bytes) -> timedelta:
    """A decodable answer's throttle (none before v2)."""
    return getattr(decode_response_frame(LIST_OFFSETS, version, frame)[1], "throttle_time", None) or timedelta(0)


def _holdable(key: tuple[str, int]) -> bool:
    return key[0] == FRESH and key[1] in ASKED[FRESH] and 0 <= key[1] < FRESH_PARTITIONS


async def _one(data: bytes) -> str:
    """The input's outcome: passed, unchanged, released, holding (or short)."""
    if len(data) < 2:
        return "short"
    version = VERSIONS[data[0] % len(VERSIONS)]
    retry_is_hostile, whole, rest = bool(data[1] & 1), bool(data[1] & 2), data[2:]
    route = _route(version)
    fresh = FreshTopics()
    fresh.add([(FRESH, FRESH_PARTITIONS)])
    client = _Client()
    link = UpstreamLink(client, _Gateway())  # type: ignore[arg-type]
    transport = _Transport()
    link._transport = transport  # type: ignore[assignment]
    request = REQUESTS[version]
    offset = decode_request_header(request, route.request_header_version)[1]
    slot = HoldablePending(CORRELATION_ID, route, request, offset, fresh)
    slot.link = link
    link.waiting.append(slot)
    first = FIRST[version] if retry_is_hostile else _hostile(FIRST[version], version, rest, whole)
    try:
        link.data_received(first)
        assert not client.failures, client.failures
        if slot.data is not None:
            assert slot.data == first and not link.holds, "a released first answer is byte for byte"
            entries = _entries(version, first)
            assert entries is None or _throttle(version, first) > timedelta(0) or not any(
                _holdable(key) and p.error_code in HELD_ERRORS for key, p in entries), "not held"
            return "passed"
        (chain,) = link.holds
        held = set(chain.wanted)
        entries = _entries(version, first)
        assert entries is not None and held and _throttle(version, first) <= timedelta(0) and all(
            _holdable(k) and any(key == k and p.error_code in HELD_ERRORS for key, p in entries) for k in held), \
            "held for what the client asked, the topic has and the answer names"
        chain._next.cancel()
        chain._send()                     # the retry, at once
        (retry,) = transport.writes
        header, at = decode_request_header(retry, route.request_header_version)
        assert (header.api_version, header.correlation_id) == (version, CORRELATION_ID)
        asked = decode_body(request_class(LIST_OFFSETS, version), retry, at)
        assert {(t.name, p.partition_index) for t in asked.topics for p in t.partitions} == held
        answer = _hostile(RETRIED[version], version, rest, whole) if retry_is_hostile else RETRIED[version]
        link.data_received(answer)
        assert not client.failures, client.failures
        retried = _entries(version, answer)
        if retried is None:
            assert slot.data == first, "a retry that does not decode releases the first answer"
            return "unchanged"
        if slot.data is not None:
            got = dict(retried)           # the last entry of a partition named twice, as the module reads it
            released = _entries(version, slot.data)
            assert released is not None and [k for k, _ in released] == [k for k, _ in entries]
            for (key, p), (_, before) in zip(released, entries, strict=True):
                assert p == before or (key in held and p == got.get(key) and p.error_code not in HELD_ERRORS)
            if version >= 2:         # a retry's throttle, when over the first's (and 0)
                before_t, retry_t = _throttle(version, first), _throttle(version, answer)
                assert _throttle(version, slot.data) == (retry_t if retry_t > max(before_t, timedelta(0)) else before_t)
            return "released"
        assert _throttle(version, answer) <= timedelta(0), "a throttled retry holds no more"
        assert chain._next is not None and link.holds == {chain}, "still holding: the next retry armed"
        return "holding"
    finally:
        link.close()
        assert not link.holds


LOOP = asyncio.new_event_loop()


def one(data: bytes) -> str:
    return LOOP.run_until_complete(_one(data))


if __name__ == "__main__":
    atheris.Setup(sys.argv, lambda data: one(bytes(data)))
    atheris.Fuzz()
