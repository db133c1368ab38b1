"""An asyncio driver for `ConsumerMember` (issue 17): the sockets and the clock around the
sans-IO member.

Rules:
- One connection to the group coordinator (found with FindCoordinator v4 through the
  bootstrap address), one request at a time: the member never has two heartbeats in
  flight, and Prepare/Install run between heartbeats.
- The application's callbacks (`Listener`) are awaited before the member is told
  (`revoked()`/`assigned()`): a revoked partition's offsets are committed before the
  coordinator hears it was released (KIP-848's revoke-before-assign).
- A request that fails (connection lost, no answer within `request_timeout_ms`) is
  retried after the member's backoff on a new connection to a freshly found coordinator.
- `stop` (an asyncio.Event) makes the member leave the group, revoking first.
"""
from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.static.primitive import i8

from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.framing import RequestHeader, decode_response_header
from coordinator.protocol.private_messages import RESPONSES as PRIVATE_RESPONSES

from .assignor import Partitions
from .consumer import Assign, Compute, ConsumerMember, Fatal, Lost, Rediscover, Revoke, State

FIND_COORDINATOR = 10


class MemberFatal(Exception):
    def __init__(self, error_code: int, message: str | None) -> None:
        super().__init__(f"group member stopped on error {error_code}: {message}")
        self.error_code = error_code


class Listener:
    """The application's side; override what you need (each awaited before the member
    reports it to the coordinator)."""

    async def on_revoke(self, partitions: Partitions) -> None: ...

    async def on_assign(self, partitions: Partitions) -> None: ...

    async def on_lost(self, partitions: Partitions) -> None: ...


def _response_class(request: Any) -> type:
    key, version = int(request.__api_key__), int(request.__version__)
    private = PRIVATE_RESPONSES.get(key)
    if private is not None:
        return private
    from coordinator.protocol.apis import response_class
    return response_class(key, version)


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self.reader, self.writer, self.client_id = reader, writer, client_id
        self.correlation_id = 0
        self.lock = asyncio.Lock()      # one request at a time: heartbeats and the app's commits

    @classmethod
    async def open(cls, host: str, port: int, client_id: str) -> Connection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, client_id)

    async def call(self, request: Any) -> Any:
        async with self.lock:
            return await self._call(request)

    async def _call(self, request: Any) -> Any:
        self.correlation_id += 1
        flexible = bool(request.__flexible__)
        header = RequestHeader(int(request.__api_key__), int(request.__version__), self.correlation_id,
                               self.client_id).encode(2 if flexible else 1)
        payload = header + encode_body(request)
        self.writer.write(struct.pack(">i", len(payload)) + payload)
        await self.writer.drain()
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        frame = b"\0\0\0\0" + await self.reader.readexactly(size)
        head, offset = decode_response_header(frame, 1 if flexible else 0)
        if head.correlation_id != self.correlation_id:
            raise ConnectionError(f"correlation id {head.correlation_id}, expected {self.correlation_id}")
        return decode_body(_response_class(request), frame, offset)

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:
            pass


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class MemberDriver:
    def __init__(self, member: ConsumerMember, bootstrap: str, listener: Listener | None = None, *,
                 client_id: str = "kcoord-members", request_timeout_ms: int = 10_000) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.bootstrap = (host, int(port))
        self.member = member
        self.listener = listener or Listener()
        self.client_id = client_id
        self.timeout = request_timeout_ms / 1000
        self.conn: Connection | None = None

    async def _coordinator(self) -> Connection:
        if self.conn is None:
            boot = await Connection.open(*self.bootstrap, self.client_id)
            try:
                found: FindCoordinatorResponse = await asyncio.wait_for(boot.call(FindCoordinatorRequest(
                    key_type=i8(0), coordinator_keys=(self.member.group_id,))), self.timeout)
            finally:
                await boot.close()
            c = found.coordinators[0]
            if c.error_code != 0:
                raise ConnectionError(f"FindCoordinator for {self.member.group_id}: {c.error_code} {c.error_message}")
            self.conn = await Connection.open(c.host, c.port, self.client_id)
        return self.conn

    async def _drop(self) -> None:
        if self.conn is not None:
            await self.conn.close()
            self.conn = None

    async def _call(self, request: Any) -> Any:
        conn = await self._coordinator()
        return await asyncio.wait_for(conn.call(request), self.timeout)

    async def run(self, stop: asyncio.Event) -> None:
        """Heartbeat until `stop` is set (then leave) or a fatal error (MemberFatal)."""
        m = self.member
        try:
            while m.state is not State.LEFT:
                if stop.is_set() and m.state is not State.LEAVING:
                    await self._handle(m.leave(_now_ms()))
                request = m.poll(_now_ms())
                if request is not None:
                    try:
                        response = await self._call(request)
                    except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError):
                        await self._drop()
                        m.request_failed(_now_ms())
                    else:
                        await self._handle(m.on_heartbeat(response, _now_ms()))
                    continue
                wait = max(0, m.next_poll_ms - _now_ms()) / 1000
                if stop.is_set():
                    await asyncio.sleep(wait)
                else:
                    try:
                        await asyncio.wait_for(stop.wait(), timeout=wait)   # woken early to leave
                    except TimeoutError:
                        pass
        finally:
            await self._drop()

    async def _handle(self, actions: list[Any]) -> None:
        m = self.member
        while actions:
            action = actions.pop(0)
            if isinstance(action, Revoke):
                await self.listener.on_revoke(action.partitions)
                actions.extend(m.revoked(_now_ms()))
            elif isinstance(action, Assign):
                await self.listener.on_assign(action.partitions)
                actions.extend(m.assigned(_now_ms()))
            elif isinstance(action, Lost):
                await self.listener.on_lost(action.partitions)
            elif isinstance(action, Compute):
                await self._compute()
            elif isinstance(action, Rediscover):
                await self._drop()
            elif isinstance(action, Fatal):
                raise MemberFatal(action.error_code, action.message)

    async def _compute(self) -> None:
        """Prepare, assign, Install (seed 000). Any failure abandons the computation: the
        coordinator re-asks (this member or another) on its own."""
        try:
            install = self.member.on_prepare(await self._call(self.member.prepare_request()))
            if install is not None:
                await self._call(install)
        except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError):
            await self._drop()
