"""The request loop both asyncio drivers share: members/driver.py (`MemberDriver`, around
a KIP-848 `ConsumerMember`) and members/connect/driver.py (`ConnectDriver`, around a
`ConnectWorker`). The two state machines speak one vocabulary (poll, on_heartbeat,
request_failed, leave, revoked, assigned; the actions Revoke, Assign, Lost, Compute,
Rediscover, Fatal), each with its own classes; a driver names its own in a `Vocabulary`.

Rules:
- One connection to the group coordinator (found with FindCoordinator v4 through the
  bootstrap address), one request at a time: never two heartbeats in flight, and
  Prepare/Install (`_compute`, the driver's own) run between heartbeats.
- The application's callbacks (the listener's on_revoke/on_assign/on_lost) are awaited
  before the machine is told (`revoked()`/`assigned()`): revoke-before-assign (KIP-848;
  the connect group spec for connect) holds because the release is reported only after the callback.
- Heartbeats go on while a callback runs (KIP-848: the session is kept by heartbeats, a
  slow revocation is bounded by the rebalance timeout; Kafka's consumer heartbeats from
  its background thread meanwhile). A member silent for a slow callback (an offset fetch
  and a seek on a loaded machine) would be expired after the session timeout while
  believing it owns what the callback was given: a zombie beside the next owner. What
  those heartbeats bring for the application (fencing, the next Revoke/Assign) is acted on
  once the callback returns; a callback whose action the machine dropped meanwhile
  (fenced) is not answered, and partitions it had just assigned are reported lost.
- A Compute (this member was asked to assign the group, docs/design/client-assignors-spec.md) runs at once, even
  during a callback: it needs nothing of the application, and the whole group waits on
  it. Deferred, a callback slow under load (or stuck) held every member's next assignment
  until the coordinator's deadline asked another member.
- A request that fails (connection lost, no answer within `request_timeout_ms`) is retried
  after the machine's backoff on a new connection to a freshly found coordinator.
- `stop` (an asyncio.Event) makes the machine leave, revoking first. Cancelling `run()`
  sends nothing: to the coordinator it is a crash, the session timeout ends it.
"""
from __future__ import annotations

import asyncio
import enum
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.static.primitive import i8

from coordinator.aio import within
from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.framing import RequestHeader, decode_response_header
from coordinator.protocol.private_messages import RESPONSES as PRIVATE_RESPONSES

IO_ERRORS = (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError)


class MemberFatal(Exception):
    def __init__(self, error_code: int, message: str | None) -> None:
        super().__init__(f"group member stopped on error {error_code}: {message}")
        self.error_code = error_code


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def _response_class(request: Any) -> type:
    key, version = int(request.__api_key__), int(request.__version__)
    private = PRIVATE_RESPONSES.get(key)       # the client-side assignor spec's 32700-32702; connect's 32703-32706
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


class Machine(Protocol):
    """What the loop needs of a sans-IO member (ConsumerMember, ConnectWorker)."""

    @property
    def group_id(self) -> str: ...

    @property
    def state(self) -> Any: ...

    @property
    def next_poll_ms(self) -> int: ...

    def poll(self, now_ms: int) -> Any | None: ...

    def request_failed(self, now_ms: int) -> None: ...

    def on_heartbeat(self, response: Any, now_ms: int) -> list[Any]: ...

    def leave(self, now_ms: int) -> list[Any]: ...

    def revoked(self, now_ms: int) -> list[Any]: ...

    def assigned(self, now_ms: int) -> list[Any]: ...

    @property
    def pending(self) -> Any: ...


class Callbacks(Protocol):
    """The application's side (members.driver.Listener, members.connect.driver.WorkerListener)."""

    async def on_revoke(self, what: Any, /) -> None: ...

    async def on_assign(self, what: Any, /) -> None: ...

    async def on_lost(self, what: Any, /) -> None: ...


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """A machine's own action classes and states; `payload` reads what a Revoke, Assign or
    Lost hands over (a consumer's partitions, a worker's units)."""

    revoke: type[Any]
    assign: type[Any]
    lost: type[Any]
    compute: type[Any]
    rediscover: type[Any]
    fatal: type[Any]
    leaving: enum.Enum
    left: enum.Enum
    payload: Callable[[Any], Any]


class DriverLoop:
    """Sockets and clock around one `Machine`. A driver sets `vocabulary` and writes
    `_compute` (Prepare, assign, Install: the payloads differ)."""

    vocabulary: Vocabulary

    def __init__(self, machine: Machine, bootstrap: str, listener: Callbacks, *, client_id: str,
                 request_timeout_ms: int) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.bootstrap = (host, int(port))
        self._machine = machine
        self.listener = listener
        self.client_id = client_id
        self.timeout = request_timeout_ms / 1000
        self.conn: Connection | None = None

    async def _coordinator(self) -> Connection:
        if self.conn is None:
            group_id = self._machine.group_id
            boot = await Connection.open(*self.bootstrap, self.client_id)
            try:
                found = await within(boot.call(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group_id,))),
                                     self.timeout)
            finally:
                await boot.close()
            c = found.coordinators[0]
            if c.error_code != 0:
                raise ConnectionError(f"FindCoordinator for {group_id}: {c.error_code} {c.error_message}")
            self.conn = await Connection.open(c.host, c.port, self.client_id)
        return self.conn

    async def _drop(self) -> None:
        if self.conn is not None:
            await self.conn.close()
            self.conn = None

    async def _call(self, request: Any) -> Any:
        conn = await self._coordinator()
        return await within(conn.call(request), self.timeout)   # keeps the cancel that stops a member

    async def run(self, stop: asyncio.Event) -> None:
        """Heartbeat until `stop` is set (then leave) or a fatal error (MemberFatal)."""
        m, v = self._machine, self.vocabulary
        try:
            while m.state is not v.left:
                if stop.is_set() and m.state is not v.leaving:
                    await self._handle(m.leave(now_ms()))
                request = m.poll(now_ms())
                if request is not None:
                    await self._handle(await self._heartbeat(request))
                    continue
                # next_poll_ms: the heartbeat interval, a backoff, or (connect) the due time
                # of an assignment held back by KIP-415's delay
                wait = max(0, m.next_poll_ms - now_ms()) / 1000
                if stop.is_set():
                    await asyncio.sleep(wait)
                else:
                    try:
                        await within(stop.wait(), wait)   # woken early to leave
                    except TimeoutError:
                        pass
        finally:
            await self._drop()

    async def _heartbeat(self, request: Any) -> list[Any]:
        m = self._machine
        try:
            response = await self._call(request)
        except IO_ERRORS:
            await self._drop()
            m.request_failed(now_ms())
            return []
        return m.on_heartbeat(response, now_ms())

    async def _handle(self, actions: list[Any]) -> None:
        m, v = self._machine, self.vocabulary
        while actions:
            action = actions.pop(0)
            if isinstance(action, v.revoke):
                later = await self._heartbeating(self.listener.on_revoke(v.payload(action)))
                if m.pending is action:
                    actions.extend(m.revoked(now_ms()))
                actions.extend(later)
            elif isinstance(action, v.assign):
                later = await self._heartbeating(self.listener.on_assign(v.payload(action)))
                if m.pending is action:
                    actions.extend(m.assigned(now_ms()))
                else:       # fenced meanwhile: what the application just took is not its own
                    actions.append(v.lost(v.payload(action)))
                actions.extend(later)
            elif isinstance(action, v.lost):
                await self.listener.on_lost(v.payload(action))
            elif isinstance(action, v.compute):
                await self._compute()
            elif isinstance(action, v.rediscover):
                await self._drop()
            elif isinstance(action, v.fatal):
                raise MemberFatal(action.error_code, action.message)

    async def _heartbeating(self, callback: Awaitable[None]) -> list[Any]:
        """Await the application's callback while the machine's heartbeats go on; return
        what they asked for meanwhile. A Rediscover is done at once (the heartbeats need it),
        and so is a Compute (the group needs it, the application does not)."""
        m, v = self._machine, self.vocabulary
        app = asyncio.ensure_future(callback)
        later: list[Any] = []
        try:
            while not app.done():
                request = m.poll(now_ms())
                if request is None:
                    wait = max(0, m.next_poll_ms - now_ms()) / 1000
                    await asyncio.wait({app}, timeout=wait or None)     # not due (or left): the app
                    continue
                for action in await self._heartbeat(request):
                    if isinstance(action, v.rediscover):
                        await self._drop()
                    elif isinstance(action, v.compute):
                        await self._compute()
                    else:
                        later.append(action)
        finally:
            if not app.done():
                app.cancel()        # run() itself was cancelled (a crash): so is the callback
        await app                   # the application's own exception, if any
        return later

    async def _compute(self) -> None:
        """Prepare, assign, Install. Any failure abandons the computation: the coordinator
        asks again (this member or another) on its own."""
        raise NotImplementedError
