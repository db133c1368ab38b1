"""The parts a ClientConnection composes, each on its own with a small fake of the
connection: flow control (flow.py), the ordered answers (responses.py), bad input
(badinput.py). The connection-level behaviour is in test_connection_flow.py."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from coordinator.config import CoordinatorConfig
from coordinator.gateway.badinput import BAD_REQUESTS, HEADER, BadInput
from coordinator.gateway.flow import CLOSED_IDLE, INFLIGHT, QUEUE, UPSTREAM, WRITE, FlowControl
from coordinator.gateway.forward import Pending
from coordinator.gateway.limits import Limits
from coordinator.gateway.ratelog import RateLimitedLog
from coordinator.gateway.responses import ResponseQueue
from coordinator.gateway.routes import FORWARD, Route
from unit.gateway.test_connection_flow import FakeTransport, until

ROUTE = Route(FORWARD, 12, 4, 2, 1, True, None)


class FakeReader:
    """What FlowControl reads of a connection, and what it does to it."""

    def __init__(self) -> None:
        self.q_requests = self.q_bytes = 0
        self.active = 0.0
        self.write_paused = False
        self.closing = False
        self.transport: FakeTransport | None = FakeTransport()
        self.unread = bytearray()
        self.peer = ("10.0.0.9", 9)
        self.listener_name = "bootstrap"
        self.owed = False
        self.reads: list[bytes] = []
        self.aborted = False

    def owes_answer(self) -> bool:
        return self.owed

    def data_received(self, data: bytes) -> None:
        self.reads.append(data)
        self.unread.clear()

    def abort(self) -> None:
        self.aborted = True


def flow_of(reader: FakeReader, **config: Any) -> FlowControl:
    limits = Limits(CoordinatorConfig(**config), clock=lambda: 100.0)
    return FlowControl(reader, limits, asyncio.get_running_loop(),
                       RateLimitedLog(logging.getLogger("test"), 100))


async def test_reading_resumes_only_when_every_reason_is_gone_and_kept_frames_go_first() -> None:
    reader = FakeReader()
    flow = flow_of(reader)
    assert reader.transport is not None
    flow.pause(INFLIGHT)
    flow.pause(WRITE)
    assert not reader.transport.reading and flow.paused == INFLIGHT | WRITE
    flow.resume(INFLIGHT)
    assert not reader.transport.reading                 # WRITE still holds
    reader.unread += b"\x00\x00\x00\x08kept"            # frames kept back at the in-flight bound
    flow.resume(WRITE)
    assert not reader.transport.reading                 # they are handled before the next read
    await until(lambda: reader.transport.reading, "reading resumed after the kept frames")  # type: ignore[union-attr]
    assert reader.reads == [b""] and flow.paused == 0


async def test_the_fair_share_pause_spares_a_connection_holding_nothing_or_mid_frame() -> None:
    reader = FakeReader()
    flow = flow_of(reader, queued_max_requests=4)
    flow.queue_paused(True)
    assert flow.paused == 0                              # holds none of the queue
    reader.q_requests, reader.q_bytes = 4, 400
    reader.unread += b"\x00\x00"                         # in the middle of a frame: reads it to its end
    flow.queue_paused(True)
    assert flow.paused == 0
    reader.unread.clear()
    flow.queue_paused(True)
    assert flow.paused == QUEUE
    flow.queue_paused(False)
    assert flow.paused == 0


async def test_the_sweep_spares_a_client_owed_an_answer_and_closes_an_idle_one() -> None:
    reader = FakeReader()
    flow = flow_of(reader, connections_max_idle_ms=1000)
    before = CLOSED_IDLE._value.get()
    reader.owed = True
    flow.sweep(5.0, 1.0)
    assert not reader.aborted
    flow.pause(UPSTREAM)
    reader.owed = False
    flow.sweep(5.0, 1.0)
    assert not reader.aborted                            # kcoord stopped reading it
    flow.resume(UPSTREAM)
    flow.sweep(5.0, 1.0)
    assert reader.aborted and CLOSED_IDLE._value.get() == before + 1


async def test_dropped_answers_leave_the_process_wide_queue_and_running_calls_are_kept() -> None:
    limits = Limits(CoordinatorConfig())
    queue = ResponseQueue()
    counted = Pending(1, ROUTE, 50)
    waiting = Pending(2, ROUTE, 30)
    waiting.task = asyncio.get_running_loop().create_future()   # type: ignore[assignment]
    queue.extend([b"ready", counted, waiting])
    limits.queued_requests, limits.queued_bytes = 2, 80
    assert not queue.head_is_local() and not queue.owes_answer()     # the head is a ready answer
    queue.popleft()
    assert queue.owes_answer() and not queue.head_is_local()         # upstream's, not the service's
    kept: list[Any] = []
    queue.drop(limits, kept.append)
    assert not queue and limits.queued_requests == 0 and limits.queued_bytes == 0
    assert kept == [waiting.task] and counted.size == 0 and waiting.size == 0


class FakeRefusing:
    peer = ("10.0.0.9", 9)
    listener_name = "bootstrap"

    def __init__(self) -> None:
        self.answers: list[bytes] = []
        self.stopped = False

    def answer(self, data: bytes) -> None:
        self.answers.append(data)

    def stop(self) -> None:
        self.stopped = True


def test_bad_input_is_counted_by_reason_and_stops_the_connection() -> None:
    class Gateway:
        bad_log = RateLimitedLog(logging.getLogger("test"), 100)
        api_versions: dict[int, tuple[int, int]] = {}

    client = FakeRefusing()
    before = BAD_REQUESTS[HEADER]._value.get()
    BadInput(client, Gateway()).reject("header truncated", ROUTE, 7, reason=HEADER)   # type: ignore[arg-type]
    assert client.stopped and client.answers == [] and BAD_REQUESTS[HEADER]._value.get() == before + 1
