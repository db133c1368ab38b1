"""GroupCalls on its own, with a fake connection: the slot of a call that waits (built
without Pending.__init__) has every field a Pending has, and its answer is framed, counted
and written when the call completes; encode_answer frames as framing.response_frame does."""
from __future__ import annotations

import asyncio
import dataclasses
import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v0.response import HeartbeatResponse as HeartbeatResponseV0
from kio.schema.heartbeat.v4.response import HeartbeatResponse as HeartbeatResponseV4

from coordinator.gateway.forward import Pending
from coordinator.gateway.group_calls import CallSlot, GroupCalls, encode_answer
from coordinator.gateway.routes import GROUP, Route
from coordinator.protocol.codec import encode_body
from coordinator.protocol.framing import response_frame
from coordinator.runtime.answer import Answer

ROUTE = Route(kind=GROUP, api_key=8, api_version=9, request_header_version=2, response_header_version=1,
              flexible=True, request_class=None)


class FakeCaller:
    """A connection as GroupCalls sees it (group_calls.Caller): keeps what it is given."""

    def __init__(self) -> None:
        self.held = 0
        self.transport: Any = object()
        self.peer = ("10.0.0.1", 1)
        self.listener_name = "test"
        self.queue: list[Any] = []
        self.answered_sizes: list[int] = []
        self.flushes = 0
        self.closed = False

    def answer(self, data: bytes) -> None:
        self.queue.append(data)

    def wait_for(self, pending: Pending) -> None:
        self.queue.append(pending)

    def answered(self, size: int) -> None:
        self.answered_sizes.append(size)

    def flush(self) -> None:
        self.flushes += 1

    def close(self) -> None:
        self.closed = True


def _slots(cls: type) -> set[str]:
    """Every slot of ``cls`` and its bases; each class must declare __slots__, else a field
    could live in a __dict__ that no slot list names."""
    names: set[str] = set()
    for klass in cls.__mro__[:-1]:   # not object
        assert "__slots__" in vars(klass), f"{klass.__name__} has no __slots__"
        names.update(vars(klass)["__slots__"])
    return names


async def test_a_waiting_calls_slot_sets_every_field_pending_init_sets() -> None:
    client = FakeCaller()
    calls = GroupCalls(client, asyncio.get_running_loop(), client.queue)
    answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    calls.waiting(answer, ROUTE, 7, 123)
    [slot] = client.queue
    assert slot.__class__ is CallSlot
    # A field Pending gains, or one CallSlot adds, that waiting() does not set is unset on a
    # slot built without __init__: reading it raises AttributeError.
    unset = {name for name in _slots(CallSlot) if not hasattr(slot, name)}
    assert not unset, f"waiting() builds its slot without Pending.__init__ and leaves {unset} unset"
    assert _slots(Pending) <= _slots(CallSlot)
    # Pending.__init__ sets exactly Pending's slots, so the list above is the one to follow.
    reference = Pending(7, ROUTE, 123)
    assert {name for name in _slots(Pending) if hasattr(reference, name)} == _slots(Pending)
    assert (slot.correlation_id, slot.route, slot.data, slot.task, slot.size, slot.calls) == \
        (7, ROUTE, None, answer, 123, calls)


async def test_a_waiting_calls_answer_is_framed_counted_and_written() -> None:
    client = FakeCaller()
    calls = GroupCalls(client, asyncio.get_running_loop(), client.queue)
    answer = Answer()      # the runtime's: its callback runs as it completes, as a commit's does
    calls.waiting(answer, ROUTE, 7, 123)
    [slot] = client.queue
    answer.set_result(bytearray(b"\x00\x01body"))
    expected = response_frame(7, b"\x00\x01body", ROUTE.response_header_version)
    assert slot.data == expected and slot.data.__class__ is bytes
    assert client.held == len(expected) and client.answered_sizes == [123] and slot.size == 0
    assert client.flushes == 1 and not client.closed   # the newest request: written at once


@pytest.mark.parametrize("readers", [0, 1])
async def test_a_waiting_calls_answer_with_or_without_another_reader_reaches_each(readers: int) -> None:
    client = FakeCaller()
    calls = GroupCalls(client, asyncio.get_running_loop(), client.queue)
    answer = Answer()
    seen: list[Any] = []
    for _ in range(readers):
        answer.add_done_callback(lambda a: seen.append(a.result()))
    calls.waiting(answer, ROUTE, 7, 123)
    [slot] = client.queue
    answer.set_result(b"\x00\x01")
    assert slot.data == response_frame(7, b"\x00\x01", ROUTE.response_header_version)
    assert seen == [b"\x00\x01"] * readers and client.flushes == 1
    assert answer._callback is None and answer._more is None, "no reference left to the slot"


@pytest.mark.parametrize("outcome", ["failed", "cancelled"])
async def test_a_waiting_calls_answer_that_failed_or_was_cancelled_closes_the_connection(
        outcome: str, caplog: pytest.LogCaptureFixture) -> None:
    client = FakeCaller()
    calls = GroupCalls(client, asyncio.get_running_loop(), client.queue)
    answer = Answer()
    calls.waiting(answer, ROUTE, 7, 123)
    [slot] = client.queue
    if outcome == "failed":
        answer.set_exception(RuntimeError("the write failed"))
    else:
        answer.cancel()
    # Read in place only when completed with a result: neither outcome is taken for a None one.
    assert slot.data is None and client.closed and client.flushes == 0 and client.held == 0
    assert client.answered_sizes == [123]
    # A failure is logged with its cause; a cancelled call closes silently.
    logged = [r.getMessage() for r in caplog.records if r.name == "kcoord.gateway"]
    if outcome == "failed":
        assert len(logged) == 1 and "the write failed" in logged[0]
    else:
        assert logged == []



async def test_a_waiting_calls_answer_that_cannot_be_encoded_closes_the_connection() -> None:
    client = FakeCaller()
    calls = GroupCalls(client, asyncio.get_running_loop(), client.queue)
    answer = Answer()
    calls.waiting(answer, ROUTE, 7, 0)
    [slot] = client.queue
    answer.set_result(object())     # not a message the codec knows
    assert slot.data is None and client.closed and client.held == 0


@pytest.mark.parametrize("response", [
    b"\x00\x00",
    bytearray(b"\x00\x1b"),
    HeartbeatResponseV0(error_code=ErrorCode.rebalance_in_progress),
    HeartbeatResponseV4(throttle_time=datetime.timedelta(0), error_code=ErrorCode.none),
], ids=["bytes", "bytearray", "kio-v0", "kio-v4"])
@pytest.mark.parametrize("header_version", [0, 1])
def test_encode_answer_frames_as_response_frame_does(response: Any, header_version: int) -> None:
    route = dataclasses.replace(ROUTE, response_header_version=header_version)
    body = bytes(response) if isinstance(response, (bytes, bytearray)) else encode_body(response)
    data = encode_answer(route, 0x01020304, response)
    assert data == response_frame(0x01020304, body, header_version)
    assert data.__class__ is bytes
