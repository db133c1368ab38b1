"""Flow control of one client connection, over a fake transport: the in-flight bound,
the process-wide queue, a client that does not read, the buffered-answer bound, the idle
sweep, admission limits. The Gateway is real but not started (no listener, no upstream)."""
from __future__ import annotations

import asyncio
import struct
from datetime import timedelta
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


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_frames_past_the_inflight_bound_wait_in_the_buffer_and_keep_their_order() -> None:
    gateway = make_gateway(max_inflight_requests_per_connection=3)
    connection, transport = connect(gateway)
    connection.data_received(b"".join(heartbeat(i, "slow") for i in range(3)) + versions(3) + heartbeat(4))
    # Three unanswered: reading stops, the other two frames are kept, not handled.
    assert not transport.reading and len(connection._queue) == 3 and transport.written == []
    assert gateway.limits.queued_requests == 3 and gateway.limits.queued_bytes == 3 * len(heartbeat(0, "slow"))
    gateway.service.release.set()
    await settle()
    assert transport.correlation_ids() == [0, 1, 2, 3, 4]
    assert transport.reading and not connection._buf
    assert gateway.limits.queued_requests == 0 and gateway.limits.queued_bytes == 0


async def test_local_answers_flushed_in_the_same_read_resume_at_once() -> None:
    gateway = make_gateway(max_inflight_requests_per_connection=2)
    connection, transport = connect(gateway)
    connection.data_received(b"".join(versions(i) for i in range(7)))
    await settle()
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


async def test_process_wide_queue_pauses_every_connection_until_answers_come() -> None:
    gateway = make_gateway(queued_max_requests=2)
    first, first_transport = connect(gateway, ("10.0.0.1", 1))
    second, second_transport = connect(gateway, ("10.0.0.2", 2))
    first.data_received(heartbeat(1, "slow") + heartbeat(2, "slow"))
    assert gateway.limits.queue_paused and not first_transport.reading and not second_transport.reading
    third, third_transport = connect(gateway, ("10.0.0.3", 3))
    assert not third_transport.reading             # a new connection is not read either
    gateway.service.release.set()
    await settle()
    assert not gateway.limits.queue_paused
    assert first_transport.reading and second_transport.reading and third_transport.reading
    assert first_transport.correlation_ids() == [1, 2]


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
    await settle()
    assert waiting_transport.correlation_ids() == [2]
    waiting.sweep(later, 1.0)                      # answered, silent since: idle now
    assert waiting_transport.aborted


async def test_a_client_not_draining_is_idle_even_with_answers_owed() -> None:
    gateway = make_gateway(connections_max_idle_ms=1000)
    connection, transport = connect(gateway)
    connection.data_received(heartbeat(1, "slow"))
    connection.pause_writing()
    connection.sweep(gateway.limits.now + 1.0, 1.0)
    assert transport.aborted
    gateway.service.release.set()
    await settle()


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
    await settle()                                 # the orphaned calls finish without counting twice
    assert gateway.limits.queued_requests == 0


async def test_upstream_answers_held_behind_a_slow_local_answer_stop_the_upstream_link() -> None:
    from coordinator.gateway.forward import HELD, UpstreamLink
    gateway = make_gateway(max_buffered_response_bytes_per_connection=2000)   # soft limit 1000
    gateway.api_versions[apis.LIST_OFFSETS] = (1, 9)
    gateway.routes = build_routes(gateway.api_versions, {apis.HEARTBEAT})
    connection, transport = connect(gateway)
    link = connection._link = UpstreamLink(connection, gateway)
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
    await settle()
    assert transport.correlation_ids() == [1, 2] and connection.held == 0
    assert not link.paused and upstream.reading


async def test_held_answers_never_stop_the_link_that_must_deliver_the_head() -> None:
    from coordinator.gateway.forward import HELD, UpstreamLink
    gateway = make_gateway(max_buffered_response_bytes_per_connection=2000)   # soft limit 1000
    gateway.api_versions[apis.LIST_OFFSETS] = (1, 9)
    gateway.routes = build_routes(gateway.api_versions, {apis.HEARTBEAT})
    connection, transport = connect(gateway)
    link = connection._link = UpstreamLink(connection, gateway)
    upstream = FakeTransport(("10.9.9.9", 9092))
    link.connection_made(upstream)
    offsets = b"\x00\x00\x00\x00\x00\x01\x00"
    # 0 forwarded, 1 slow local, 2 forwarded, 3 local with a 1500-byte answer
    connection.data_received(encode_request(apis.LIST_OFFSETS, 9, 0, offsets) + heartbeat(1, "slow")
                             + encode_request(apis.LIST_OFFSETS, 9, 2, offsets) + heartbeat(3, "late"))
    gateway.service.release_late.set()
    await settle()
    assert connection.held == 1500 + 9                                  # 3's answer, held behind 0
    link.data_received(struct.pack(">ii", 8, 0) + b"\x00" * 4)          # answer 0: written at once
    assert transport.correlation_ids() == [0]
    assert link.paused & HELD and not upstream.reading                  # held > 1000 behind slow 1
    gateway.service.release.set()
    await settle()
    # 1 is written; the head is now 2, a forwarded request: the link must read again
    # although 3's answer is still held behind it (else 2 never comes: a deadlock).
    assert transport.correlation_ids() == [0, 1] and connection.held == 1509
    assert not link.paused and upstream.reading
    link.data_received(struct.pack(">ii", 8, 2) + b"\x00" * 4)
    assert transport.correlation_ids() == [0, 1, 2, 3] and connection.held == 0
