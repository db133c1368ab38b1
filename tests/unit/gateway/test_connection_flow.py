"""Flow control of one client connection, over a fake transport: the in-flight bound,
the process-wide queue, a client that does not read, the buffered-answer bound, the idle
sweep, admission limits. The Gateway is real but not started (no listener, no upstream)."""
from __future__ import annotations

import asyncio
import struct
from datetime import timedelta
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.gateway import Gateway
from coordinator.gateway.connection import ClientConnection
from coordinator.gateway.listeners import BOOTSTRAP, ListenerInfo
from coordinator.gateway.routes import build_routes
from coordinator.protocol import apis
from coordinator.protocol.api_versions import Features, api_versions_body
from coordinator.protocol.apis import response_class
from coordinator.protocol.framing import write_uvarint
from support.raw_client import encode_request, request

LISTENER = ListenerInfo(BOOTSTRAP, "127.0.0.1", 0, None, (("127.0.0.1", 1),))


class FakeTransport(asyncio.Transport):
    def __init__(self, peer: tuple[str, int] = ("10.1.1.1", 5555)) -> None:
        super().__init__()
        self.peer = peer
        self.written: list[bytes] = []
        self.reading = True
        self.closed = self.aborted = False
        self.buffer = 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.peer if name == "peername" else default

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return self.buffer

    def correlation_ids(self) -> list[int]:
        data = b"".join(self.written)
        ids, pos = [], 0
        while pos < len(data):
            size, cid = struct.unpack_from(">ii", data, pos)
            ids.append(cid)
            pos += 4 + size
        return ids


class HeartbeatService:
    """Heartbeat: answers at once, except for group "slow", which waits for ``release``,
    and group "late", which waits for ``release_late`` and answers 1500 bytes."""

    api_versions = {apis.HEARTBEAT: (0, 4)}

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.release_late = asyncio.Event()

    def partition_for(self, group_id: str) -> int:
        return 0

    async def handle(self, api_key: int, api_version: int, req: Any, client: Any) -> Any:
        if req.group_id == "slow":
            await self.release.wait()
        if req.group_id == "late":
            await self.release_late.wait()
            return b"\x00" * 1500   # an encoded body, as the service may return
        return response_class(api_key, api_version)(error_code=ErrorCode.none, throttle_time=timedelta(0))


def make_gateway(**settings: Any) -> Gateway:
    service = HeartbeatService()
    gateway = Gateway(service, "127.0.0.1:1", "127.0.0.1:0", "state", config=CoordinatorConfig(**settings))
    gateway.api_versions = {apis.API_VERSIONS: (0, 4), apis.HEARTBEAT: (0, 4)}
    gateway.routes = build_routes(gateway.api_versions, {apis.HEARTBEAT})
    gateway.api_versions_bodies = {v: api_versions_body(v, gateway.api_versions, Features()) for v in range(5)}
    return gateway


def connect(gateway: Gateway, peer: tuple[str, int] = ("10.1.1.1", 5555)) -> tuple[ClientConnection, FakeTransport]:
    connection = ClientConnection(gateway, LISTENER)
    transport = FakeTransport(peer)
    connection.connection_made(transport)
    return connection, transport


def heartbeat(correlation_id: int, group: str = "g") -> bytes:
    return encode_request(apis.HEARTBEAT, 4, correlation_id, request(
        apis.HEARTBEAT, 4, group_id=group, generation_id=1, member_id="m", group_instance_id=None))


def versions(correlation_id: int) -> bytes:
    return encode_request(apis.API_VERSIONS, 2, correlation_id, request(apis.API_VERSIONS, 2))


async def until(condition: Callable[[], object], what: str, timeout: float = 5.0) -> None:
    """Runs the loop until ``condition()`` holds (callbacks and tasks the test set off)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0)


async def test_frames_past_the_inflight_bound_wait_in_the_buffer_and_keep_their_order() -> None:
    gateway = make_gateway(max_inflight_requests_per_connection=3)
    connection, transport = connect(gateway)
    connection.data_received(b"".join(heartbeat(i, "slow") for i in range(3)) + versions(3) + heartbeat(4))
    # Three unanswered: reading stops, the other two frames are kept, not handled.
    assert not transport.reading and len(connection._queue) == 3 and transport.written == []
    # The two frames kept back count in the queue's bytes too (read, not answered).
    kept = len(versions(3) + heartbeat(4))
    assert len(connection.unread) == kept
    assert gateway.limits.queued_requests == 3 and gateway.limits.queued_bytes == 3 * len(heartbeat(0, "slow")) + kept
    gateway.service.release.set()
    await until(lambda: len(transport.correlation_ids()) == 5, "all five answers")
    assert transport.correlation_ids() == [0, 1, 2, 3, 4]
    assert transport.reading and not connection.unread
    assert gateway.limits.queued_requests == 0 and gateway.limits.queued_bytes == 0


async def test_local_answers_flushed_in_the_same_read_resume_at_once() -> None:
    gateway = make_gateway(max_inflight_requests_per_connection=2)
    connection, transport = connect(gateway)
    connection.data_received(b"".join(versions(i) for i in range(7)))
    await until(lambda: len(transport.correlation_ids()) == 7, "seven answers")
    assert transport.correlation_ids() == list(range(7)) and transport.reading


async def test_a_client_that_does_not_read_is_not_read_and_closed_past_the_buffer_bound() -> None:
    gateway = make_gateway(max_buffered_response_bytes_per_connection=10_000)
    connection, transport = connect(gateway)
    connection.pause_writing()                     # asyncio: the write buffer is over its high mark
    assert not transport.reading
    connection.resume_writing()
    assert transport.reading
    connection.pause_writing()
    transport.buffer = 10_001                      # it still does not read
    connection.data_received(versions(1))          # data already in flight when reading stopped
    assert transport.aborted and gateway.limits.queued_requests == 0


async def test_process_wide_queue_pauses_the_connections_holding_it_not_the_others() -> None:
    """Review item 6: over queued.max.requests only connections holding their fair share
    stop reading; the others' heartbeats are still read and answered."""
    gateway = make_gateway(queued_max_requests=4)
    first, first_transport = connect(gateway, ("10.0.0.1", 1))
    second, second_transport = connect(gateway, ("10.0.0.2", 2))
    first.data_received(b"".join(heartbeat(i, "slow") for i in range(4)))
    assert gateway.limits.queue_paused and not first_transport.reading
    assert second_transport.reading                # holds none of the queue
    second.data_received(heartbeat(10))            # answered at once, still read
    assert second_transport.correlation_ids() == [10] and second_transport.reading
    third, third_transport = connect(gateway, ("10.0.0.3", 3))
    assert third_transport.reading                 # a new connection holds nothing either
    second.data_received(heartbeat(11, "slow") + heartbeat(12, "slow"))
    # 6 queued, 3 connections: a fair share is 4/3; second now holds 2 and stops too.
    assert not second_transport.reading and third_transport.reading
    gateway.service.release.set()
    await until(lambda: not gateway.limits.queue_paused, "the queue back under its bound")
    assert first_transport.reading and second_transport.reading and third_transport.reading
    assert first_transport.correlation_ids() == [0, 1, 2, 3]


async def test_idle_sweep_closes_a_half_frame_but_not_a_client_waiting_for_its_answer() -> None:
    gateway = make_gateway(connections_max_idle_ms=1000)
    half, half_transport = connect(gateway, ("10.0.0.1", 1))
    half.data_received(heartbeat(1)[:9])
    waiting, waiting_transport = connect(gateway, ("10.0.0.2", 2))
    waiting.data_received(heartbeat(2, "slow"))
    later = gateway.limits.now + 1.0
    for connection in (half, waiting):
        connection.sweep(later - 0.5, 1.0)
    assert not half_transport.aborted              # not idle for long enough yet
    for connection in (half, waiting):
        connection.sweep(later, 1.0)
    assert half_transport.aborted and not waiting_transport.aborted
    gateway.service.release.set()
    await until(lambda: waiting_transport.correlation_ids() == [2], "the owed answer")
    waiting.sweep(later, 1.0)                      # answered, silent since: idle now
    assert waiting_transport.aborted


async def test_a_client_not_draining_is_idle_even_with_answers_owed() -> None:
    gateway = make_gateway(connections_max_idle_ms=1000)
    connection, transport = connect(gateway)
    connection.data_received(heartbeat(1, "slow"))
    connection.pause_writing()
    connection.sweep(gateway.limits.now + 1.0, 1.0)
    assert transport.aborted
    connection.connection_lost(None)
    gateway.service.release.set()
    await until(lambda: not gateway._orphans, "the orphaned call finished")


async def test_connections_over_the_per_ip_limit_are_closed_and_released_ones_free_a_slot() -> None:
    gateway = make_gateway(max_connections_per_ip=1)
    first, first_transport = connect(gateway, ("10.0.0.1", 1))
    second, second_transport = connect(gateway, ("10.0.0.1", 2))
    assert second_transport.aborted and not first_transport.aborted
    assert gateway.connections == {first}
    second.connection_lost(None)                   # a refused connection releases nothing
    assert gateway.limits.per_ip == {"10.0.0.1": 1}
    first.connection_lost(None)
    assert gateway.limits.per_ip == {} and gateway.connections == set()
    _, third_transport = connect(gateway, ("10.0.0.1", 3))
    assert not third_transport.aborted


async def test_a_closed_connection_gives_back_its_queue_share() -> None:
    gateway = make_gateway()
    connection, _ = connect(gateway)
    connection.data_received(heartbeat(1, "slow") + heartbeat(2, "slow"))
    assert gateway.limits.queued_requests == 2
    connection.connection_lost(None)
    assert gateway.limits.queued_requests == 0 and gateway.limits.queued_bytes == 0
    gateway.service.release.set()
    await until(lambda: not gateway._orphans, "the orphaned calls finished")   # without counting twice
    assert gateway.limits.queued_requests == 0


async def test_upstream_answers_held_behind_a_slow_local_answer_stop_the_upstream_link() -> None:
    from coordinator.gateway.forward import HELD, UpstreamLink
    gateway = make_gateway(max_buffered_response_bytes_per_connection=2000)   # soft limit 1000
    gateway.api_versions[apis.LIST_OFFSETS] = (1, 9)
    gateway.routes = build_routes(gateway.api_versions, {apis.HEARTBEAT})
    connection, transport = connect(gateway)
    link = connection.link = UpstreamLink(connection, gateway)
    upstream = FakeTransport(("10.9.9.9", 9092))
    link.connection_made(upstream)
    list_offsets = encode_request(apis.LIST_OFFSETS, 9, 2, b"\x00\x00\x00\x00\x00\x01\x00")
    connection.data_received(heartbeat(1, "slow") + list_offsets)
    assert upstream.written == [list_offsets]        # forwarded byte for byte
    answer = struct.pack(">ii", 1500 + 4, 2) + b"\x00" * 1500
    link.data_received(answer)
    # The answer waits behind the slow heartbeat: past half the bound, upstream is not read.
    assert connection.held == len(answer) and link.paused & HELD and not upstream.reading
    assert not transport.aborted and transport.written == []
    gateway.service.release.set()
    await until(lambda: transport.correlation_ids() == [1, 2], "both answers")
    assert connection.held == 0
    assert not link.paused and upstream.reading


async def test_held_answers_never_stop_the_link_that_must_deliver_the_head() -> None:
    from coordinator.gateway.forward import HELD, UpstreamLink
    gateway = make_gateway(max_buffered_response_bytes_per_connection=2000)   # soft limit 1000
    gateway.api_versions[apis.LIST_OFFSETS] = (1, 9)
    gateway.routes = build_routes(gateway.api_versions, {apis.HEARTBEAT})
    connection, transport = connect(gateway)
    link = connection.link = UpstreamLink(connection, gateway)
    upstream = FakeTransport(("10.9.9.9", 9092))
    link.connection_made(upstream)
    offsets = b"\x00\x00\x00\x00\x00\x01\x00"
    # 0 forwarded, 1 slow local, 2 forwarded, 3 local with a 1500-byte answer
    connection.data_received(encode_request(apis.LIST_OFFSETS, 9, 0, offsets) + heartbeat(1, "slow")
                             + encode_request(apis.LIST_OFFSETS, 9, 2, offsets) + heartbeat(3, "late"))
    gateway.service.release_late.set()
    await until(lambda: connection.held == 1500 + 9, "3's answer, held behind 0")
    link.data_received(struct.pack(">ii", 8, 0) + b"\x00" * 4)          # answer 0: written at once
    assert transport.correlation_ids() == [0]
    assert link.paused & HELD and not upstream.reading                  # held > 1000 behind slow 1
    gateway.service.release.set()
    await until(lambda: transport.correlation_ids() == [0, 1], "1 written")
    # 1 is written; the head is now 2, a forwarded request: the link must read again
    # although 3's answer is still held behind it (else 2 never comes: a deadlock).
    assert transport.correlation_ids() == [0, 1] and connection.held == 1509
    assert not link.paused and upstream.reading
    link.data_received(struct.pack(">ii", 8, 2) + b"\x00" * 4)
    assert transport.correlation_ids() == [0, 1, 2, 3] and connection.held == 0


def _with_list_offsets(gateway: Gateway) -> Gateway:
    gateway.api_versions[apis.LIST_OFFSETS] = (1, 9)
    gateway.routes = build_routes(gateway.api_versions, {apis.HEARTBEAT})
    return gateway


OFFSETS_BODY = b"\x00\x00\x00\x00\x00\x01\x00"   # ListOffsets v9: replica 0, isolation 0, no topics, no tags


def _linked(gateway: Gateway, connection: ClientConnection) -> tuple[Any, FakeTransport]:
    from coordinator.gateway.forward import UpstreamLink
    link = connection.link = UpstreamLink(connection, gateway)
    upstream = FakeTransport(("10.9.9.9", 9092))
    link.connection_made(upstream)
    return link, upstream


def _bad_frames(reason: str) -> float:
    from coordinator import metrics
    return metrics.GATEWAY_BAD_REQUESTS.labels(reason=reason)._value.get()


async def test_a_request_above_max_decoded_request_bytes_closes_before_it_is_decoded() -> None:
    """Review item 1: a socket.request.max.bytes frame of tiny elements would stall the
    loop in the walk or kio's decoding; past max_decoded_request_bytes it closes, reason
    "frame", whatever its API (unroutable ones included)."""
    gateway = make_gateway(max_decoded_request_bytes=100)
    before = _bad_frames("frame")
    small, small_transport = connect(gateway)
    small.data_received(heartbeat(1, "g" * 40))
    assert small_transport.correlation_ids() == [1] and not small.closing
    big, big_transport = connect(gateway, ("10.0.0.2", 2))
    big.data_received(versions(7) + heartbeat(8, "g" * 100))
    assert big.closing and big_transport.correlation_ids() == [7]   # what came before is answered
    unknown, _ = connect(gateway, ("10.0.0.3", 3))
    unknown.data_received(encode_request(999, 0, 9, b"x" * 120))
    assert unknown.closing
    assert _bad_frames("frame") == before + 2


async def test_a_closing_connection_whose_client_does_not_read_is_aborted_by_the_sweep() -> None:
    """Review item 2: after a bad frame the transport is closed gracefully; a client that
    never reads kept its slot and buffered answers for ever. The sweep aborts it."""
    gateway = make_gateway(connections_max_idle_ms=1000)
    connection, transport = connect(gateway)
    connection.data_received(versions(1) + encode_request(999, 0, 2, b""))
    assert transport.closed and not transport.aborted
    connection.sweep(gateway.limits.now + 0.5, 1.0)
    assert not transport.aborted
    connection.sweep(gateway.limits.now + 1.0, 1.0)
    assert transport.aborted


async def test_closing_a_client_that_does_not_read_aborts_at_once() -> None:
    """Review item 2: a graceful close waits for the write buffer to drain: never, here."""
    gateway = make_gateway()
    connection, transport = connect(gateway)
    connection.pause_writing()
    connection.upstream_failed("upstream 10.9.9.9:9092 closed the connection")
    assert transport.aborted


async def test_local_answers_behind_an_unanswered_request_count_against_the_buffered_bound() -> None:
    """Review item 3: answers made at once waited behind a JoinGroup-like request without
    being counted, past max_buffered_response_bytes_per_connection."""
    gateway = make_gateway(max_buffered_response_bytes_per_connection=10_000)
    connection, transport = connect(gateway)
    answer = len(gateway.api_versions_bodies[2]) + 8
    count = 10_000 // answer + 2
    connection.data_received(heartbeat(0, "slow") + b"".join(versions(i) for i in range(1, count // 2)))
    assert not transport.aborted and connection.held == (count // 2 - 1) * answer
    connection.data_received(b"".join(versions(i) for i in range(count // 2, count)))
    assert transport.aborted and transport.written == []
    gateway.service.release.set()


async def test_local_answers_written_at_once_leave_nothing_held() -> None:
    gateway = make_gateway()
    connection, transport = connect(gateway)
    connection.data_received(versions(1) + heartbeat(2))
    assert transport.correlation_ids() == [1, 2] and connection.held == 0


async def test_the_client_is_not_read_while_its_upstream_link_opens(monkeypatch: Any) -> None:
    """Review item 4: requests read while the upstream connection opened piled up in its
    outbox without bound (acks=0 Produce frames uncounted)."""
    from coordinator.gateway.forward import UpstreamLink
    monkeypatch.setattr(UpstreamLink, "open", lambda self, addresses: None)   # opened by hand below
    gateway = _with_list_offsets(make_gateway())
    gateway._listeners[LISTENER.name] = LISTENER
    connection, transport = connect(gateway)
    request = encode_request(apis.LIST_OFFSETS, 9, 1, OFFSETS_BODY)
    connection.data_received(request)
    assert not transport.reading
    upstream = FakeTransport(("10.9.9.9", 9092))
    connection.link.connection_made(upstream)
    assert transport.reading and upstream.written == [request]


async def test_an_upstream_that_never_answers_the_connect_fails_the_client_after_the_timeout(
        monkeypatch: Any) -> None:
    """Review item 4: _connect had no timeout."""
    from coordinator.gateway.forward import UpstreamLink
    gateway = make_gateway(upstream_connect_timeout_ms=50)
    failures: list[str] = []

    class Client:
        listener_name = "bootstrap"

        def upstream_failed(self, reason: str) -> None:
            failures.append(reason)

    async def never(*args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    monkeypatch.setattr(asyncio.get_running_loop(), "create_connection", never)
    link = UpstreamLink(Client(), gateway)   # type: ignore[arg-type]
    link.open((("10.9.9.9", 9092),))
    await until(lambda: failures, "the connect to time out", timeout=5)
    assert "10.9.9.9:9092: not connected after upstream_connect_timeout_ms=50" in failures[0]


async def test_a_frame_read_in_part_counts_in_the_queue_bytes_until_it_completes_or_closes() -> None:
    """Review item 5: a half-received frame grew up to socket.request.max.bytes per
    connection, uncounted in queued.max.request.bytes."""
    gateway = make_gateway(queued_max_request_bytes=1000)
    limits = gateway.limits
    connection, transport = connect(gateway)
    head = struct.pack(">i", 5000) + b"\x00" * 600
    connection.data_received(head)
    assert limits.queued_bytes == 604 and not limits.queue_paused
    connection.data_received(b"\x00" * 600)
    assert limits.queued_bytes == 1204 and limits.queue_paused
    connection.connection_lost(None)
    assert limits.queued_bytes == 0
    other, other_transport = connect(gateway, ("10.0.0.2", 2))
    frame = heartbeat(1)
    other.data_received(frame[:10])
    assert limits.queued_bytes == 10
    other.data_received(frame[10:])
    assert limits.queued_bytes == 0 and other_transport.correlation_ids() == [1]


async def test_frames_waiting_at_the_inflight_bound_are_cut_once(monkeypatch: Any) -> None:
    """Review item 11: at the bound every answer re-cut (copied) every buffered frame."""
    from coordinator.gateway import connection as connection_module
    cut: list[int] = []
    real = connection_module.split_frames

    def counting(*args: Any) -> Any:
        frames, used, error = real(*args)
        cut.append(len(frames))
        return frames, used, error

    monkeypatch.setattr(connection_module, "split_frames", counting)
    gateway = make_gateway(max_inflight_requests_per_connection=3)
    connection, transport = connect(gateway)
    connection.data_received(b"".join(heartbeat(i, "slow") for i in range(3))
                             + b"".join(versions(i) for i in range(3, 60)))
    gateway.service.release.set()
    await until(lambda: len(transport.correlation_ids()) == 60, "all sixty answers")
    assert transport.correlation_ids() == list(range(60))
    assert sum(cut) == 60, cut


async def test_upstream_failures_are_logged_rate_limited(caplog: Any) -> None:
    """Review item 13: an upstream outage closes every client connection: one WARNING each
    would flood the log."""
    import logging
    caplog.set_level(logging.WARNING, logger="kcoord.gateway")
    gateway = make_gateway(bad_request_log_rate_per_second=2)
    for i in range(10):
        connection, _ = connect(gateway, (f"10.0.0.{i}", i))
        connection.upstream_failed("upstream 10.9.9.9:9092 closed the connection")
    lines = [r.getMessage() for r in caplog.records if "closed the connection" in r.getMessage()]
    assert len(lines) == 2, lines


async def test_a_forwarded_request_whose_client_id_is_not_utf8_is_forwarded() -> None:
    """Review item 20: Kafka decodes the client id leniently; kcoord closed the connection."""
    gateway = _with_list_offsets(make_gateway())
    connection, transport = connect(gateway)
    _, upstream = _linked(gateway, connection)
    payload = struct.pack(">hhih", apis.LIST_OFFSETS, 9, 4, 3) + b"a\xffb" + b"\x00" + OFFSETS_BODY
    request = struct.pack(">i", len(payload)) + payload
    connection.data_received(request)
    assert upstream.written == [request] and not connection.closing


async def test_a_big_produce_cannot_hide_a_long_header_past_max_decoded_request_bytes(monkeypatch: Any) -> None:
    """Review item 1: a Produce may be up to socket.request.max.bytes and is not walked
    above max_decoded_request_bytes; its header tags must not be skipped one by one past
    that bound instead (50 million empty tags fit in 100 MiB)."""
    from coordinator.gateway.forward import UpstreamLink
    monkeypatch.setattr(UpstreamLink, "open", lambda self, addresses: None)
    gateway = make_gateway(max_decoded_request_bytes=500)
    gateway.api_versions[apis.PRODUCE] = (9, 9)
    gateway.routes = build_routes(gateway.api_versions, {apis.HEARTBEAT})
    before = _bad_frames("header")
    connection, _ = connect(gateway)
    payload = (struct.pack(">hhih", apis.PRODUCE, 9, 1, 1) + b"c" + write_uvarint(1000) + b"\x00\x00" * 1000
               + b"\x00" * 100)
    connection.data_received(struct.pack(">i", len(payload)) + payload)
    assert connection.closing and _bad_frames("header") == before + 1
