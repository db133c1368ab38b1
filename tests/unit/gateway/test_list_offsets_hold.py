"""A ListOffsets answer held while a just-created topic's log does not exist: the registry, which
answers are held, the retries, the merge and the bounds (coordinator/gateway/fresh_topics.py,
coordinator/gateway/list_offsets_hold.py)."""
from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from coordinator.gateway import list_offsets_hold as hold
from coordinator.gateway.forward import HELD, Pending, UpstreamLink
from coordinator.gateway.forwarding import Forwarding
from coordinator.gateway.fresh_topics import FreshTopics
from coordinator.gateway.list_offsets_hold import HoldablePending, merged, retry_frame, unready
from coordinator.gateway.produce_check import OFFSET_FOR_LEADER_EPOCH
from coordinator.gateway.routes import build_routes, route_key
from coordinator.metrics import GATEWAY_FORWARDED_BYTES, GATEWAY_LIST_OFFSETS_HELD
from coordinator.protocol.apis import LIST_OFFSETS, SASL_HANDSHAKE, request_class
from coordinator.protocol.codec import decode_body, decode_response_frame
from coordinator.protocol.framing import decode_request_header
from support.raw_client import encode_request, request_types

from .test_tansu_list_offsets import list_answer

ROUTES = build_routes({LIST_OFFSETS: (1, 11), SASL_HANDSHAKE: (0, 1)}, ())
VERSIONS = tuple(range(1, 12))
NLOF = int(ErrorCode.not_leader_or_follower)
UNKNOWN = int(ErrorCode.unknown_topic_or_partition)


def route(version: int) -> Any:
    return ROUTES[route_key(LIST_OFFSETS, version)]


def list_request(version: int, asks: dict[str, dict[int, int]], timeout_ms: int = 30_000,
                 correlation_id: int = 7) -> bytes:
    types = request_types(LIST_OFFSETS, version)
    epoch: dict[str, int] = {"current_leader_epoch": 3} if version >= 4 else {}
    topics = tuple(types.ListOffsetsTopic(name=name, partitions=tuple(
        types.ListOffsetsPartition(partition_index=p, timestamp=t, **epoch) for p, t in parts.items()))
        for name, parts in asks.items())
    fields: dict[str, Any] = {"replica_id": -1, "topics": topics}
    if version >= 2:
        fields["isolation_level"] = 1
    if version >= 10:
        fields["timeout"] = timedelta(milliseconds=timeout_ms)
    return encode_request(LIST_OFFSETS, version, correlation_id, request_class(LIST_OFFSETS, version)(**fields))


def throttle_ms(version: int, frame: bytes) -> int:
    return int(decode_response_frame(LIST_OFFSETS, version, frame)[1].throttle_time.total_seconds() * 1000)


def offsets(version: int, frame: bytes) -> dict[tuple[str, int], tuple[int, int]]:
    _, response = decode_response_frame(LIST_OFFSETS, version, frame)
    return {(t.name, p.partition_index): (p.error_code, p.offset) for t in response.topics for p in t.partitions}


def asked(version: int, frame: bytes) -> tuple[Any, Any]:
    header, offset = decode_request_header(frame, route(version).request_header_version)
    return header, decode_body(request_class(LIST_OFFSETS, version), frame, offset)


def count(outcome: str) -> float:
    return GATEWAY_LIST_OFFSETS_HELD.labels(outcome=outcome)._value.get()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------- the registry

def test_fresh_topics_expire_after_their_window() -> None:
    clock = Clock()
    fresh = FreshTopics(window_s=30.0, clock=clock)
    assert not fresh
    fresh.add([("a", 1)])
    clock.now += 20
    fresh.add([("b", 1)])
    assert fresh and "a" in fresh and "b" in fresh and "c" not in fresh
    clock.now += 11                 # a: 31 s old, b: 11 s
    assert "a" not in fresh and "b" in fresh
    assert fresh and len(fresh) == 1      # the check forgot a
    clock.now += 20
    assert not fresh and len(fresh) == 0


def test_fresh_topics_are_bounded_oldest_first() -> None:
    clock = Clock()
    fresh = FreshTopics(max_entries=3, clock=clock)
    fresh.add([("a", 1), ("b", 1), ("c", 1)])
    fresh.add([("a", 1)])           # created again: now the newest
    fresh.add([("d", 1)])
    assert len(fresh) == 3 and "b" not in fresh and {"a", "c", "d"} == {n for n in "abcd" if n in fresh}


# ---------------------------------------------------------------- the pure parts

def test_fresh_topics_keep_their_partition_count() -> None:
    clock = Clock()
    fresh = FreshTopics(window_s=30.0, clock=clock)
    fresh.add([("a", 4), ("unknown", -1), ("zero", 0)])    # a count not known is not kept
    assert fresh.partitions("a") == 4 and "a" in fresh
    assert fresh.partitions("unknown") == 0 and "unknown" not in fresh and "zero" not in fresh
    assert len(fresh) == 1
    clock.now += 31
    assert fresh.partitions("a") == 0


def test_only_fresh_topics_with_a_missing_log_are_unready() -> None:
    fresh = FreshTopics()
    fresh.add([("changelog", 4)])
    answer = list_answer(9, {"changelog": {0: (NLOF, -1), 1: (UNKNOWN, -1), 2: (0, 5), 3: (78, -1)},
                             "other": {0: (NLOF, -1)}})
    assert unready(route(9), answer, fresh) == {("changelog", 0), ("changelog", 1)}
    assert unready(route(9), struct.pack(">ii", 7, 7) + b"\xff", fresh) == set()


def test_partition_indexes_the_topic_does_not_have_are_never_held() -> None:
    # An index beyond the topic's count stays UNKNOWN_TOPIC_OR_PARTITION for good: holding it
    # would make kcoord send the request again every 25 ms until the bound.
    fresh = FreshTopics()
    fresh.add([("changelog", 2)])
    answer = list_answer(9, {"changelog": {0: (NLOF, -1), 1: (UNKNOWN, -1), 2: (UNKNOWN, -1), 7: (UNKNOWN, -1),
                                           -1: (UNKNOWN, -1), 2**31 - 1: (UNKNOWN, -1)}})
    assert unready(route(9), answer, fresh) == {("changelog", 0), ("changelog", 1)}
    beyond = list_answer(9, {"changelog": {2: (UNKNOWN, -1), -5: (UNKNOWN, -1)}})
    assert unready(route(9), beyond, fresh) == set()


def test_a_throttled_first_answer_is_not_held() -> None:
    answer = list_answer(9, {"c": {0: (NLOF, -1)}}, throttle_ms=300)
    assert unready(route(9), answer, fresh_of("c")) == set()
    assert unready(route(9), list_answer(9, {"c": {0: (NLOF, -1)}}), fresh_of("c")) == {("c", 0)}


def test_merge_replaces_only_the_retried_partitions() -> None:
    answer = list_answer(9, {"c": {0: (NLOF, -1), 1: (0, 4)}, "o": {0: (0, 9)}})
    retried = decode_response_frame(LIST_OFFSETS, 9, list_answer(9, {"c": {0: (0, 12)}}))[1]
    got = merged(route(9), answer, {("c", 0): retried.topics[0].partitions[0]})
    assert offsets(9, got) == {("c", 0): (0, 12), ("c", 1): (0, 4), ("o", 0): (0, 9)}
    assert decode_response_frame(LIST_OFFSETS, 9, got)[0] == 7
    assert merged(route(9), answer, {}) is answer


def test_the_merge_keeps_the_largest_throttle() -> None:
    answer = list_answer(9, {"c": {0: (NLOF, -1)}}, throttle_ms=20)
    retried = decode_response_frame(LIST_OFFSETS, 9, list_answer(9, {"c": {0: (0, 12)}}))[1]
    part = {("c", 0): retried.topics[0].partitions[0]}
    assert throttle_ms(9, merged(route(9), answer, part, timedelta(milliseconds=500))) == 500
    assert throttle_ms(9, merged(route(9), answer, part, timedelta(milliseconds=5))) == 20
    assert throttle_ms(9, merged(route(9), answer, {}, timedelta(milliseconds=70))) == 70
    assert merged(route(9), answer, {}, timedelta(milliseconds=20)) is answer
    v1 = list_answer(1, {"c": {0: (NLOF, -1)}})                  # v1 has no throttle field
    assert merged(route(1), v1, {}, timedelta(milliseconds=70)) == v1


def test_a_retry_is_the_clients_request_for_the_unready_partitions() -> None:
    request = list_request(10, {"c": {0: -1, 1: -2, 2: -1}, "o": {0: -1}}, timeout_ms=400, correlation_id=42)
    header, body = asked(10, request)
    offset = decode_request_header(request, route(10).request_header_version)[1]
    frame = retry_frame(route(10), request[4:offset], body, {("c", 1), ("c", 2)})
    got_header, got = asked(10, frame)
    assert (got_header.correlation_id, got_header.client_id) == (42, header.client_id)
    assert got.isolation_level == 1 and got.timeout == timedelta(milliseconds=400)
    assert [(t.name, [(p.partition_index, p.timestamp, p.current_leader_epoch) for p in t.partitions])
            for t in got.topics] == [("c", [(1, -2, 3), (2, -1, 3)])]
    assert len(frame) < len(request)


def test_the_bound_is_a_second_or_the_requests_timeout() -> None:
    assert hold.hold_bound(asked(9, list_request(9, {"c": {0: -1}}))[1]) == hold.MAX_HOLD_S
    assert hold.hold_bound(asked(10, list_request(10, {"c": {0: -1}}, timeout_ms=200))[1]) == pytest.approx(0.2)
    assert hold.hold_bound(asked(10, list_request(10, {"c": {0: -1}}, timeout_ms=60_000))[1]) == hold.MAX_HOLD_S


# ---------------------------------------------------------------- on a link

class FakeTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class FakeClient:
    listener_name = "PLAINTEXT"

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.released = 0
        self.held = 0
        self.held_soft_limit = 1 << 30
        self.flushes = 0

    def answered(self, size: int) -> None:
        self.released += size

    def flush(self) -> None:
        self.flushes += 1

    def head_is_local(self) -> bool:
        return False

    def upstream_failed(self, reason: str) -> None:
        self.failures.append(reason)


class FakeGateway:
    limits = None


def linked(version: int, request: bytes, fresh: FreshTopics) -> tuple[UpstreamLink, HoldablePending, FakeTransport,
                                                                      FakeClient]:
    client = FakeClient()
    link = UpstreamLink(client, FakeGateway())  # type: ignore[arg-type]
    transport = FakeTransport()
    link._transport = transport  # type: ignore[assignment]
    offset = decode_request_header(request, route(version).request_header_version)[1]
    slot = HoldablePending(7, route(version), request, offset, fresh)
    slot.link = link
    link.waiting.append(slot)
    return link, slot, transport, client


async def until(condition: Callable[[], bool], what: str) -> None:
    """Let the loop run (its timers included) until ``condition``; bounded."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5.0
    while not condition():
        assert loop.time() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.005)


async def held_both() -> tuple[bytes, UpstreamLink, HoldablePending, FakeTransport, FakeClient]:
    """A ListOffsets v9 of fresh topic c's partitions 0 and 1, both answered
    NOT_LEADER_OR_FOLLOWER: held, its first retry sent. (request, link, slot, transport, client)"""
    request = list_request(9, {"c": {0: -1, 1: -1}})
    link, slot, transport, client = linked(9, request, fresh_of("c"))
    link.data_received(list_answer(9, {"c": {0: (NLOF, -1), 1: (NLOF, -1)}}))
    await until(lambda: len(transport.writes) == 1, "the first retry")
    return request, link, slot, transport, client


def fresh_of(*names: str, partitions: int = 4) -> FreshTopics:
    fresh = FreshTopics()
    fresh.add((name, partitions) for name in names)
    return fresh


async def test_an_answer_without_a_missing_log_passes_byte_for_byte() -> None:
    request = list_request(9, {"c": {0: -1}, "o": {0: -1}})
    link, slot, transport, client = linked(9, request, fresh_of("c"))
    answer = list_answer(9, {"c": {0: (0, 5)}, "o": {0: (NLOF, -1)}})     # "o" is not fresh
    link.data_received(answer)
    assert slot.data == answer and client.released == 2 * len(request) and slot.size == 0
    assert not link.holds and not link.waiting and transport.writes == []


async def test_held_until_every_partition_answers_then_merged() -> None:
    answered_before = count("answered")
    request = list_request(9, {"c": {0: -1, 1: -1, 2: -2}, "o": {0: -1}})
    link, slot, transport, client = linked(9, request, fresh_of("c"))
    link.data_received(list_answer(9, {"c": {0: (NLOF, -1), 1: (UNKNOWN, -1), 2: (0, 0)}, "o": {0: (0, 9)}}))
    assert slot.data is None and client.released == 0 and len(link.holds) == 1
    await until(lambda: len(transport.writes) == 1, "the first retry")
    first = asked(9, transport.writes[0])[1]
    assert sorted((t.name, p.partition_index) for t in first.topics for p in t.partitions) == [("c", 0), ("c", 1)]
    link.data_received(list_answer(9, {"c": {0: (0, 17), 1: (NLOF, -1)}}))          # one of two
    assert slot.data is None
    await until(lambda: len(transport.writes) == 2, "the second retry")
    second = asked(9, transport.writes[1])[1]
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in second.topics] == [("c", [1])]
    link.data_received(list_answer(9, {"c": {1: (0, 4)}}))
    assert slot.data is not None and not client.failures
    assert offsets(9, slot.data) == {("c", 0): (0, 17), ("c", 1): (0, 4), ("c", 2): (0, 0), ("o", 0): (0, 9)}
    assert client.released == 2 * len(request) and slot.size == 0
    assert not link.holds and not link.waiting and count("answered") == answered_before + 1


@pytest.mark.parametrize("version", VERSIONS)
async def test_held_and_merged_in_every_version(version: int) -> None:
    request = list_request(version, {"c": {0: -1, 1: -1}}, correlation_id=7)
    link, slot, transport, client = linked(version, request, fresh_of("c"))
    link.data_received(list_answer(version, {"c": {0: (NLOF, -1), 1: (0, 2)}}))
    assert slot.data is None
    await until(lambda: len(transport.writes) == 1, "the retry")
    header, retry = asked(version, transport.writes[0])
    assert header.api_version == version and [(t.name, [p.partition_index for p in t.partitions])
                                              for t in retry.topics] == [("c", [0])]
    link.data_received(list_answer(version, {"c": {0: (0, 9)}}))
    assert offsets(version, slot.data or b"") == {("c", 0): (0, 9), ("c", 1): (0, 2)} and not client.failures


async def test_another_error_ends_the_hold_with_that_answer() -> None:
    request = list_request(9, {"c": {0: -1}})
    link, slot, transport, _ = linked(9, request, fresh_of("c"))
    link.data_received(list_answer(9, {"c": {0: (NLOF, -1)}}))
    await until(lambda: len(transport.writes) == 1, "the retry")
    link.data_received(list_answer(9, {"c": {0: (78, -1)}}))        # OFFSET_NOT_AVAILABLE: the client's to handle
    assert slot.data is not None and offsets(9, slot.data) == {("c", 0): (78, -1)}


async def test_a_retry_that_does_not_decode_releases_the_original() -> None:
    gave_up = count("gave_up")
    request = list_request(9, {"c": {0: -1}})
    link, slot, transport, client = linked(9, request, fresh_of("c"))
    original = list_answer(9, {"c": {0: (NLOF, -1)}})
    link.data_received(original)
    await until(lambda: len(transport.writes) == 1, "the retry")
    link.data_received(struct.pack(">ii", 5, 7) + b"\xff")
    assert slot.data == original and not client.failures and count("gave_up") == gave_up + 1


async def test_the_bound_releases_the_answer_with_what_was_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hold, "MAX_HOLD_S", 0.1)
    gave_up = count("gave_up")
    request, link, slot, transport, client = await held_both()
    monkeypatch.setattr(hold, "RETRY_INTERVAL_S", 60.0)     # no second retry before the bound
    link.data_received(list_answer(9, {"c": {0: (0, 3), 1: (NLOF, -1)}}))
    await until(lambda: slot.data is not None, "the release at the bound")
    assert offsets(9, slot.data or b"") == {("c", 0): (0, 3), ("c", 1): (NLOF, -1)}   # what was answered
    assert count("gave_up") == gave_up + 1 and client.released == 2 * len(request) and client.flushes
    assert not link.holds and not link.waiting and len(transport.writes) == 1 and not client.failures


async def test_a_retry_upstream_at_the_bound_is_read_and_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hold, "MAX_HOLD_S", 0.1)
    request = list_request(9, {"c": {0: -1}})
    link, slot, transport, client = linked(9, request, fresh_of("c"))
    original = list_answer(9, {"c": {0: (NLOF, -1)}})
    link.data_received(original)
    await until(lambda: len(transport.writes) == 1, "the retry")
    # The retry is not answered before the bound: it is certainly upstream when the bound passes.
    await until(lambda: slot.data is not None, "the release at the bound")
    assert slot.data == original and not link.holds and len(link.waiting) == 1
    link.data_received(list_answer(9, {"c": {0: (0, 8)}}))
    assert slot.data == original and not link.waiting and not client.failures and len(transport.writes) == 1


async def test_a_throttled_retry_ends_the_hold_and_the_client_gets_the_throttle() -> None:
    gave_up = count("gave_up")
    request, link, slot, transport, client = await held_both()
    (chain,) = link.holds
    link.data_received(list_answer(9, {"c": {0: (0, 3), 1: (NLOF, -1)}}, throttle_ms=250))
    assert slot.data is not None and count("gave_up") == gave_up + 1
    assert offsets(9, slot.data) == {("c", 0): (0, 3), ("c", 1): (NLOF, -1)} and throttle_ms(9, slot.data) == 250
    assert chain.done and chain._next is None and not link.holds and not link.waiting and not client.failures


async def test_a_shorter_request_timeout_is_not_held() -> None:
    request = list_request(10, {"c": {0: -1}}, timeout_ms=10)
    link, slot, transport, _ = linked(10, request, fresh_of("c"))
    answer = list_answer(10, {"c": {0: (NLOF, -1)}})
    link.data_received(answer)
    assert slot.data == answer and not link.holds


async def test_a_released_answer_pauses_the_link_behind_a_local_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    # An answer released at the bound counts in the client's held bytes as one read upstream
    # does: past the soft limit, behind a slower local answer, the link stops reading.
    monkeypatch.setattr(hold, "MAX_HOLD_S", 0.05)
    request = list_request(9, {"c": {0: -1}})
    link, slot, transport, client = linked(9, request, fresh_of("c"))
    client.held_soft_limit = 10
    client.head_is_local = lambda: True  # type: ignore[method-assign]
    link.data_received(list_answer(9, {"c": {0: (NLOF, -1)}}))
    assert not link.paused & HELD                     # the held answer is not the client's yet
    await until(lambda: slot.data is not None, "the release at the bound")
    assert client.held == len(slot.data or b"") and link.paused & HELD


async def test_a_retrys_answer_is_not_counted_as_forwarded_to_the_client() -> None:
    to_client = GATEWAY_FORWARDED_BYTES.labels(listener=FakeClient.listener_name, direction="to_client")
    request = list_request(9, {"c": {0: -1}})
    link, slot, transport, _ = linked(9, request, fresh_of("c"))
    before = to_client._value.get()
    original = list_answer(9, {"c": {0: (NLOF, -1)}})
    link.data_received(original)                       # the client gets it (merged) once released
    assert to_client._value.get() == before + len(original)
    await until(lambda: len(transport.writes) == 1, "the retry")
    retry_answer = list_answer(9, {"c": {0: (0, 4)}})
    link.data_received(retry_answer[:5])               # a partial frame counts once whole
    link.data_received(retry_answer[5:])
    assert slot.data is not None and to_client._value.get() == before + len(original)


# ---------------------------------------------------------------- SASL re-authentication

def sasl_handshake(correlation_id: int) -> bytes:
    return encode_request(SASL_HANDSHAKE, 1, correlation_id, request_class(SASL_HANDSHAKE, 1)(mechanism="PLAIN"))


async def test_a_sasl_frame_ends_every_hold_before_it_goes_up() -> None:
    """KIP-368: a client re-authenticating sends SaslHandshake with requests in flight; Kafka's
    SaslServerAuthenticator closes the connection on a ListOffsets between SaslHandshake and
    SaslAuthenticate, so no retry may follow the SASL frame on the link."""
    gave_up = count("gave_up")
    request, link, slot, transport, client = await held_both()
    link.data_received(list_answer(9, {"c": {0: (0, 6), 1: (NLOF, -1)}}))     # the next retry is armed
    (chain,) = link.holds
    assert chain._next is not None
    # A second ListOffsets still upstream when the handshake goes: its answer is not held.
    second = list_request(9, {"c": {1: -1}}, correlation_id=8)
    in_flight = HoldablePending(8, route(9), second, decode_request_header(second, route(9).request_header_version)[1],
                                slot.fresh or FreshTopics())
    in_flight.link = link
    link.waiting.append(in_flight)
    forwarding = Forwarding(FakeForwarder(link), ForwardingGateway(fresh_of("c")))  # type: ignore[arg-type]
    handshake = sasl_handshake(9)
    forwarding.forward(handshake, Pending(9, ROUTES[route_key(SASL_HANDSHAKE, 1)], len(handshake)))
    forwarding.send_read()
    # Ended as at the bound, before the handshake went up: released in order, nothing armed.
    assert chain.done and chain._next is None and chain._deadline is None and not link.holds
    assert slot.data is not None and offsets(9, slot.data) == {("c", 0): (0, 6), ("c", 1): (NLOF, -1)}
    assert count("gave_up") == gave_up + 1 and client.flushes
    assert transport.writes[-1] == handshake and len(transport.writes) == 2
    later = list_answer(9, {"c": {1: (NLOF, -1)}}, correlation_id=8)
    link.data_received(later)
    assert in_flight.data == later and not link.holds          # passed as it came, not held
    assert transport.writes[-1] == handshake and not client.failures


async def test_closing_the_link_cancels_the_chain() -> None:
    cancelled = count("cancelled")
    request = list_request(9, {"c": {0: -1}})
    link, slot, transport, _ = linked(9, request, fresh_of("c"))
    link.data_received(list_answer(9, {"c": {0: (NLOF, -1)}}))
    (chain,) = link.holds
    link.close()
    assert chain.done and not link.holds and count("cancelled") == cancelled + 1
    chain._send()                    # a timer that fired anyway sends nothing
    assert transport.writes == [] and slot.data is None


async def test_a_lost_upstream_sends_no_retry() -> None:
    request = list_request(9, {"c": {0: -1}})
    link, slot, transport, client = linked(9, request, fresh_of("c"))
    link.data_received(list_answer(9, {"c": {0: (NLOF, -1)}}))
    (chain,) = link.holds
    link.connection_lost(None)       # the client's close (link.close) follows; until then nothing goes up
    assert client.failures and link.closed
    chain._send()
    assert transport.writes == [] and not link._outbox and list(link.waiting) == []
    link.close()
    assert chain.done and not link.holds


# ---------------------------------------------------------------- the forwarding side

class FakeForwarder:
    listener_name = "PLAINTEXT"
    write_paused = False

    def __init__(self, link: Any) -> None:
        self.link = link
        self.queue: list[Pending] = []

    def wait_for(self, pending: Pending) -> None:
        self.queue.append(pending)


class Service:
    def __init__(self, fresh: FreshTopics) -> None:
        self.fresh_topics = fresh


class Cluster:
    upstream_api_versions = {OFFSET_FOR_LEADER_EPOCH: (0, 4), LIST_OFFSETS: (1, 11)}


class ForwardingGateway:
    cluster = Cluster()

    def __init__(self, fresh: FreshTopics) -> None:
        self.service = Service(fresh)


def forwarded(fresh: FreshTopics) -> Pending:
    link = UpstreamLink(FakeClient(), FakeGateway())  # type: ignore[arg-type]
    client = FakeForwarder(link)
    forwarding = Forwarding(client, ForwardingGateway(fresh))  # type: ignore[arg-type]
    request = list_request(9, {"c": {0: -1}})
    forwarding.checked(request, route(9), 7)
    assert forwarding.outgoing == [request] and list(link.waiting) == client.queue
    (pending,) = client.queue
    return pending


def test_with_nothing_fresh_a_list_offsets_goes_up_as_before() -> None:
    pending = forwarded(FreshTopics())
    assert pending.__class__ is Pending


def test_with_a_fresh_topic_a_list_offsets_goes_up_holdable() -> None:
    pending = forwarded(fresh_of("c"))
    assert isinstance(pending, HoldablePending) and pending.link is not None
    assert pending.size == 2 * len(list_request(9, {"c": {0: -1}}))   # room for its one retry upstream


# ---------------------------------------------------------------- the service's side

class CreateLink:
    """A fake upstream link answering each topic of a CreateTopics with its error in ``errors``."""

    closed = False

    def __init__(self, errors: dict[str, ErrorCode], extra: tuple[str, ...] = (), partitions: int = 0) -> None:
        self.errors = errors
        self.extra = extra                # names answered that were not asked (a hostile upstream)
        self.partitions = partitions      # the count answered for a topic asked with -1

    async def request(self, request: Any, timeout: float) -> Any:
        from coordinator.protocol.kio_build import build
        from coordinator.protocol.messages import schema
        mod = schema("create_topics", int(request.__version__))

        def result(name: str, partitions: int) -> Any:
            return build(mod.CreatableTopicResult, name=name, topic_id=None, error_code=self.errors.get(name, 0),
                         error_message=None, topic_config_error_code=0,
                         num_partitions=partitions if partitions > 0 else self.partitions, replication_factor=1,
                         configs=())
        return build(mod.CreateTopicsResponse, throttle_time=timedelta(0), topics=tuple(
            result(t.name, t.num_partitions) for t in request.topics) + tuple(result(n, 3) for n in self.extra))

    def close(self) -> None:
        pass


async def test_the_creator_registers_only_the_topics_it_created() -> None:
    from coordinator.group.streams.topic_names import CreatableTopic
    from coordinator.service.streams_topics import InternalTopicCreator
    link = CreateLink({"made": ErrorCode.none, "there": ErrorCode.topic_already_exists,
                       "refused": ErrorCode.policy_violation})

    async def open_link() -> CreateLink:
        return link
    fresh = FreshTopics()
    creator = InternalTopicCreator(open_link, fresh=fresh)
    creator.create([CreatableTopic(name, 4, -1, ()) for name in ("made", "there", "refused")], 10_000)
    await until(lambda: not creator.in_flight, "the CreateTopics answer")
    assert "made" in fresh and "there" not in fresh and "refused" not in fresh and len(fresh) == 1
    assert fresh.partitions("made") == 4


async def test_the_creator_registers_only_names_it_asked_with_their_count() -> None:
    from coordinator.group.streams.topic_names import CreatableTopic
    from coordinator.service.streams_topics import InternalTopicCreator
    # A hostile upstream answers names it was not asked: none becomes fresh.
    link = CreateLink({"made": ErrorCode.none, "default": ErrorCode.none}, extra=("victim", "made-too"),
                      partitions=6)

    async def open_link() -> CreateLink:
        return link
    fresh = FreshTopics()
    creator = InternalTopicCreator(open_link, fresh=fresh)
    creator.create([CreatableTopic("made", 4, -1, ()), CreatableTopic("default", -1, -1, ())], 10_000)
    await until(lambda: not creator.in_flight, "the CreateTopics answer")
    assert "victim" not in fresh and "made-too" not in fresh and len(fresh) == 2
    assert fresh.partitions("made") == 4 and fresh.partitions("default") == 6   # -1: the answer's count


def test_the_services_registry_is_the_one_its_creator_writes() -> None:
    from coordinator.service.streams_apis import creator_of

    class Service:
        state_topic = None
        image = None
        fresh_topics = FreshTopics()
    service = Service()
    assert creator_of(service)._fresh is Service.fresh_topics
