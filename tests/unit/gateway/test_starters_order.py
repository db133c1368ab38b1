"""A service's starters (GroupCoordinatorService.starters): the connection queues an answer
handed back at once, and completes a future handed back from its callback, in request order;
a starter that raises, or a future that is cancelled, closes the connection."""
from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.gateway import Gateway
from coordinator.gateway.routes import build_routes
from coordinator.protocol import apis
from coordinator.protocol.api_versions import Features, api_versions_body
from coordinator.protocol.apis import response_class

from .test_connection_flow import connect, heartbeat, until


class StartedService:
    """Heartbeat served by a starter: group "slow" answers with a future the test completes,
    "boom" raises; ``handle`` is never called."""

    api_versions = {apis.HEARTBEAT: (0, 4)}

    def __init__(self) -> None:
        self.waiting: list[asyncio.Future] = []
        self.starters = {apis.HEARTBEAT: self.start}

    def partition_for(self, group_id: str) -> int:
        return 0

    async def handle(self, api_key: int, api_version: int, req: Any, client: Any) -> Any:
        raise AssertionError("a started API does not go through handle")

    def start(self, api_version: int, req: Any, client: Any) -> Any:
        if req.group_id == "boom":
            raise RuntimeError("the service broke")
        answer = response_class(apis.HEARTBEAT, api_version)(error_code=ErrorCode.none, throttle_time=timedelta(0))
        if req.group_id == "slow":
            waiting = asyncio.get_running_loop().create_future()
            waiting.answer = answer   # type: ignore[attr-defined]
            self.waiting.append(waiting)
            return waiting
        return answer


def _gateway() -> tuple[Gateway, StartedService]:
    service = StartedService()
    gateway = Gateway(service, "127.0.0.1:1", "127.0.0.1:0", "state", config=CoordinatorConfig())  # type: ignore[arg-type]
    gateway.api_versions = {apis.API_VERSIONS: (0, 4), apis.HEARTBEAT: (0, 4)}
    gateway.routes = build_routes(gateway.api_versions, {apis.HEARTBEAT})
    gateway.api_versions_bodies = {v: api_versions_body(v, gateway.api_versions, Features()) for v in range(5)}
    return gateway, service


async def test_an_answer_that_waits_keeps_its_place_before_later_ready_ones() -> None:
    gateway, service = _gateway()
    connection, transport = connect(gateway)
    connection.data_received(heartbeat(1, "slow") + heartbeat(2) + heartbeat(3))
    await asyncio.sleep(0)
    assert transport.written == [], "the head waits: nothing behind it is written"
    assert connection.owes_answer() and connection.head_is_local()
    (waiting,) = service.waiting
    waiting.set_result(waiting.answer)   # type: ignore[attr-defined]
    await until(lambda: transport.correlation_ids() == [1, 2, 3], "the three answers, in order")
    assert connection.held == 0 and len(transport.written) == 1, "one write for the three"
    connection.data_received(heartbeat(4) + heartbeat(5, "slow") + heartbeat(6))
    assert transport.correlation_ids() == [1, 2, 3, 4], "a ready head is written at once"
    service.waiting[1].set_result(service.waiting[1].answer)   # type: ignore[attr-defined]
    await until(lambda: transport.correlation_ids() == [1, 2, 3, 4, 5, 6], "the rest, in order")


async def test_a_starter_that_raises_or_a_cancelled_answer_closes_the_connection() -> None:
    gateway, service = _gateway()
    connection, transport = connect(gateway)
    connection.data_received(heartbeat(1, "boom"))
    assert transport.closed or transport.aborted or connection.closing
    connection, transport = connect(gateway, ("10.1.1.2", 5555))
    connection.data_received(heartbeat(1, "slow"))
    service.waiting[-1].cancel()
    await until(lambda: transport.closed or transport.aborted, "the close")
    assert transport.written == []


async def test_a_read_of_one_whole_frame_is_answered_and_a_frame_over_the_bound_still_closes() -> None:
    gateway, _ = _gateway()
    connection, transport = connect(gateway)
    connection.data_received(heartbeat(1))               # one whole frame: handled as read
    connection.data_received(bytearray(heartbeat(2)))    # not bytes: cut by the general path
    assert transport.correlation_ids() == [1, 2] and not connection.unread
    frame = heartbeat(3)
    connection.data_received(frame[:5])                  # a partial frame, then its rest
    connection.data_received(frame[5:])
    assert transport.correlation_ids() == [1, 2, 3]
    gateway.max_frame_size = len(heartbeat(4)) - 5       # the size prefix now claims too much
    bounded, bounded_transport = connect(gateway)
    bounded.data_received(heartbeat(4))
    assert bounded.closing and bounded_transport.correlation_ids() == []


async def test_a_served_request_that_does_not_parse_is_refused_after_the_ones_before_it() -> None:
    gateway, _ = _gateway()
    connection, transport = connect(gateway)
    good, bad = heartbeat(1), heartbeat(2)
    cut = bad[:-3]                                        # the body ends early: BodyError
    cut = len(cut[4:]).to_bytes(4, "big") + cut[4:]
    connection.data_received(good + cut)
    assert transport.correlation_ids() == [1] and connection.closing
