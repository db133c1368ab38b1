"""Calls a client connection hands to the GroupService (or an authorizer) that do not finish
at once, and calls that fail.

Rules: a call is started with the service's starter or eager.start (most finish without
waiting; the connection queues those answers itself, on the heartbeat's path). One that
waits (a Task, a future the service completes from a callback, or the runtime's Answer,
which completes in its write's callback) takes its place in
the ordered answers and counts in the process-wide queue until it finishes; calls finishing
in the same loop iteration share one flush (one write), but the newest request's answer is
written at once (nothing behind it can join that write). A call that fails, or an answer
that cannot be encoded, closes the connection with one log line naming the API (Kafka
closes a connection whose request it cannot serve); a cancelled call closes it silently.
When the client has gone the call runs to completion all the same and its answer is dropped.
`GroupCalls` reaches its connection only through `Caller`.
"""
from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Sequence
from typing import Any, Protocol

from ..protocol.apis import api_name
from ..protocol.codec import encode_body
from ..runtime.answer import _DONE, Answer
from .eager import Done
from .forward import Pending
from .routes import Route

log = logging.getLogger("kcoord.gateway")

# The response header (framing.response_frame's): size, correlation id, and from header v1
# an empty tagged-fields section.
_RESPONSE_V0 = struct.Struct(">ii")
_RESPONSE_V1 = struct.Struct(">iiB")


class Caller(Protocol):
    """What a connection's waiting calls use of it."""

    held: int

    @property
    def transport(self) -> asyncio.Transport | None: ...

    @property
    def peer(self) -> tuple[str, int]: ...

    @property
    def listener_name(self) -> str: ...

    def answer(self, data: bytes) -> None: ...

    def wait_for(self, pending: Pending) -> None:
        """Queue ``pending`` in request order (counted in the process-wide queue if sized)."""

    def answered(self, size: int) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


def encode_answer(route: Route, correlation_id: int, response: Any) -> bytes:
    """The framed answer of a group call (the service may answer with the encoded body
    already): a waiting call's, and one ready at once (the heartbeat's, group_requests.py).

    Its callers are Python, so it runs in their interpreter loop, and it writes the response
    header itself (framing.response_frame's two layouts) so that the answer costs one Python
    call as it did when each caller framed it: a second call, to response_frame, cost 418
    instructions per steady heartbeat and 475 per durable 4-partition commit
    (bench/callgrind_gateway_heartbeat.py). It calls into C for ``bytes`` only with a body
    that is not ``bytes`` already. tests/unit/gateway/test_group_calls.py holds its frames
    equal to response_frame's.
    """
    body = response if isinstance(response, (bytes, bytearray)) else encode_body(response)
    if body.__class__ is not bytes:
        body = bytes(body)
    if route.response_header_version == 0:
        return _RESPONSE_V0.pack(len(body) + 4, correlation_id) + body
    return _RESPONSE_V1.pack(len(body) + 5, correlation_id, 0) + body


class GroupCalls:
    __slots__ = ("_client", "_loop", "_flush_scheduled", "_queue")

    def __init__(self, client: Caller, loop: asyncio.AbstractEventLoop, queue: Sequence[Any] = ()) -> None:
        self._client = client
        self._loop = loop
        self._flush_scheduled = False
        self._queue = queue     # the connection's ordered answers (responses.py), read only

    def outcome(self, outcome: Done | asyncio.Task, route: Route, correlation_id: int, size: int) -> None:
        """Queue the answer of a call started with eager.start: now if it is done, else when
        it finishes (a request of ``size`` > 0 bytes counts in the process-wide queue)."""
        if outcome.__class__ is Done:
            if outcome.error is None:   # type: ignore[union-attr]
                try:
                    data = encode_answer(route, correlation_id, outcome.value)  # type: ignore[union-attr]
                except Exception as e:
                    self.failed(route, correlation_id, e)
                    return
                self._client.answer(data)
            else:
                self.failed(route, correlation_id, outcome.error)  # type: ignore[union-attr, arg-type]
            return
        self.waiting(outcome, route, correlation_id, size)  # type: ignore[arg-type]

    def waiting(self, answer: asyncio.Future | Answer, route: Route, correlation_id: int, size: int) -> None:
        """Queue the answer ``answer`` will hold (a Task's, a future the service completes
        from a callback, or the runtime's Answer) in its request's place, written when it is
        done."""
        # The slot's own method is the done-callback: called from Python (Answer._complete) it
        # runs in the caller's interpreter loop, where a partial would enter a new one. The
        # slot is built without Pending.__init__, every slot set here instead, for the cost:
        # a type's __init__ is reached through C and enters a new interpreter loop
        # (docs/measurements/cpu-per-commit.md, "The shell's fixed cost per commit"); through
        # it a durable 4-partition commit took 302 instructions more (216,944 against 216,642).
        # tests/unit/gateway/test_group_calls.py fails if a slot of Pending's is left unset here.
        slot = _new_slot(CallSlot)
        # One store per slot: an assignment to four or more targets builds a tuple and unpacks it.
        slot.correlation_id = correlation_id
        slot.route = route
        slot.data = None
        slot.task = answer   # type: ignore[assignment]
        slot.size = size
        slot.calls = self
        self._client.wait_for(slot)
        if answer.__class__ is Answer and answer._callback is None and not answer._state:
            # The runtime's answer of a durable commit, pending with no reader yet: its one
            # callback slot set here, what add_done_callback does then, without the call.
            answer._callback = slot.done
        else:
            answer.add_done_callback(slot.done)

    def failed(self, route: Route, correlation_id: int, error: BaseException) -> None:
        client = self._client
        if isinstance(error, asyncio.CancelledError):
            client.close()
            return
        peer = client.peer
        log.error("closing connection from %s:%d on %s: group service failed on %s v%d "
                  "(correlation_id=%d): %s", peer[0], peer[1], client.listener_name,
                  api_name(route.api_key), route.api_version, correlation_id, error,
                  exc_info=(type(error), error, error.__traceback__))
        client.close()

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self._client.flush()


class CallSlot(Pending):
    """A waiting group call's place in the ordered answers; its ``done`` is called with the
    call's outcome (a Task, a future or the runtime's Answer) when it is done."""

    __slots__ = ("calls",)
    calls: GroupCalls

    def done(self, task: asyncio.Future[Any] | Answer) -> None:
        """The call has finished (e.g. its state-topic write is acknowledged)."""
        calls = self.calls
        client = calls._client
        if client.transport is None:
            return   # the client went away; the call ran to completion all the same
        size = self.size
        if size:
            client.answered(size)
            self.size = 0
        route = self.route
        if task.__class__ is Answer and task._state == _DONE and task._error is None:
            # The runtime's answer, completed with a result (a durable commit's): read in
            # place, not through result(), a Python call per commit for the same value.
            response = task._result
        else:
            try:
                response = task.result()
            except asyncio.CancelledError:
                calls.failed(route, self.correlation_id, asyncio.CancelledError())
                return
            except BaseException as error:  # noqa: BLE001 - the call's failure closes the connection
                calls.failed(route, self.correlation_id, error)
                return
        try:
            data = encode_answer(route, self.correlation_id, response)
        except Exception as e:
            calls.failed(route, self.correlation_id, e)
            return
        self.data = data
        client.held += len(data)
        queue = calls._queue
        if queue and queue[-1] is self:
            # Nothing behind it can finish later in this iteration: write now, without a
            # trip through the ready queue (one request in flight, the closed loop's case).
            client.flush()
            return
        # Calls finishing in the same loop iteration share one flush (one write).
        if not calls._flush_scheduled:
            calls._flush_scheduled = True
            calls._loop.call_soon(calls._scheduled_flush)


_new_slot = object.__new__
