"""asyncio side of the load generator: multiplexed connections and a driver for many
simulated KIP-848 members.

`KafkaConnection` keeps any number of requests in flight on one socket and matches
responses by correlation id (Kafka answers in order, but matching by id also catches a
server that does not). `MemberDriver` runs simulated members over a set of connections:
each member has one request in flight at most, as real consumers do; many members may
share one connection, which Kafka allows.
"""
from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from .consumer_member import API_VERSION, ConsumerMember
from .wire import (
    CONSUMER_GROUP_HEARTBEAT,
    FrameTemplate,
    correlation_of,
    decode_response,
    encode_request,
    split_responses,
)

Callback = Callable[[Any], None]
RETRY_BACKOFF_S = 0.1      # Java's retry.backoff.ms default: any error other than a fence is retried


class ConnectionClosed(Exception):
    pass


class KafkaConnection(asyncio.Protocol):
    """One TCP connection with pipelined requests, answered through callbacks."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._pending: dict[int, tuple[int, int, Callback]] = {}
        self._next_id = 1
        self.closed = asyncio.get_running_loop().create_future()
        self.sent = 0
        self.received = 0

    @classmethod
    async def open(cls, host: str, port: int) -> KafkaConnection:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(cls, host, port)
        return conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self._buf += data
        pending = self._pending
        for frame in split_responses(self._buf):
            entry = pending.pop(correlation_of(frame), None)
            if entry is None:
                raise RuntimeError(f"response with unknown correlation id {correlation_of(frame)}")
            self.received += 1
            api_key, api_version, callback = entry
            callback(decode_response(api_key, api_version, frame))

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if not self.closed.done():
            self.closed.set_result(exc)

    def send(self, api_key: int, api_version: int, request: Any, callback: Callback) -> None:
        """Send ``request`` (a kio request, or a FrameTemplate of the same API) now."""
        if self._transport is None:
            raise ConnectionClosed("connection is closed")
        correlation_id = self._next_id
        self._next_id = (correlation_id + 1) & 0x7FFFFFFF
        if isinstance(request, FrameTemplate):
            frame = request.with_correlation(correlation_id)
        else:
            frame = encode_request(api_key, api_version, request, correlation_id)
        self._pending[correlation_id] = (api_key, api_version, callback)
        self.sent += 1
        self._transport.write(frame)

    async def call(self, api_key: int, api_version: int, request: Any, timeout: float = 30.0) -> Any:
        fut = asyncio.get_running_loop().create_future()
        self.send(api_key, api_version, request, lambda r: fut.done() or fut.set_result(r))
        return await asyncio.wait_for(fut, timeout)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


async def open_connections(host: str, port: int, n: int) -> list[KafkaConnection]:
    return list(await asyncio.gather(*(KafkaConnection.open(host, port) for _ in range(n))))


# (member, response, monotonic time of arrival) after the member applied the response
Observer = Callable[[ConsumerMember, Any, float], None]


class MemberDriver:
    """Runs simulated KIP-848 members: join, heartbeat on their interval, acknowledge at once."""

    def __init__(self, connections: Sequence[KafkaConnection], members: Sequence[ConsumerMember],
                 observer: Observer | None = None) -> None:
        self.connections = list(connections)
        self.members = list(members)
        self.observer = observer
        self._loop = asyncio.get_running_loop()
        self._conn_of = {id(m): self.connections[i % len(self.connections)] for i, m in enumerate(self.members)}
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._last_send: dict[int, float] = {}
        self._running = False
        self.requests = 0
        self.responses = 0

    def start(self) -> None:
        """Every member sends its join now, in one pass of the loop (a join storm)."""
        self._running = True
        for member in self.members:
            self._send(member)

    def stop(self) -> None:
        self._running = False
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def _send(self, member: ConsumerMember) -> None:
        key = id(member)
        self._timers.pop(key, None)
        if not self._running:
            return
        if member.is_steady():
            request: Any = member.steady_template()
        else:
            request = member.next_request()
        self._last_send[key] = self._loop.time()
        self.requests += 1
        try:
            self._conn_of[key].send(CONSUMER_GROUP_HEARTBEAT, API_VERSION, request,
                                    lambda response, m=member: self._on_response(m, response))
        except ConnectionClosed:
            self._running = False

    def _on_response(self, member: ConsumerMember, response: Any) -> None:
        self.responses += 1
        now_mono = time.monotonic()
        at_once = member.on_response(response)
        if self.observer is not None:
            self.observer(member, response, now_mono)
        if not self._running:
            return
        key = id(member)
        if at_once:
            self._send(member)
        elif response.error_code != ErrorCode.none:
            self._timers[key] = self._loop.call_later(RETRY_BACKOFF_S, self._send, member)
        else:
            due = self._last_send[key] + member.heartbeat_interval_ms / 1000
            self._timers[key] = self._loop.call_at(due, self._send, member)
