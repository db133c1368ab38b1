"""A task cancelled while its link waits stops, even when the answer lands in the same loop
turn as the cancellation: on Python 3.11 `asyncio.wait_for` returned the answer and dropped
the cancellation there (CPython gh-86296), which kept the cluster membership's side
heartbeats running after their join had ended. The link awaits the bare future (nothing to
drop a cancellation) and bounds it with one timer per link: a request never answered still
fails within its timeout, also after an earlier request was answered, and a shorter timeout
after a longer one is kept."""
from __future__ import annotations

import asyncio

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from coordinator.upstream.client import UpstreamClient, UpstreamError


async def _silent_server() -> tuple[asyncio.AbstractServer, int]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()      # reads requests, never answers: the test answers by hand
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_a_cancel_in_the_turn_the_answer_lands_is_not_dropped():
    server, port = await _silent_server()
    try:
        link = await UpstreamClient.connect([("127.0.0.1", port)])
        for _ in range(50):
            asking = asyncio.create_task(link.request(ApiVersionsRequest(), timeout=5))
            await asyncio.sleep(0)                  # the request is written and waiting
            (future, *_), = link._pending.values()
            future.set_result("answer")             # the answer lands ...
            asking.cancel()                         # ... in the turn the asker is cancelled
            with pytest.raises(asyncio.CancelledError):
                await asking
            link._pending.clear()
        link.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_a_request_still_times_out_naming_the_api():
    server, port = await _silent_server()
    try:
        link = await UpstreamClient.connect([("127.0.0.1", port)])
        with pytest.raises(UpstreamError, match=r"api_versions v0 to 127.0.0.1:\d+ timed out after 0.05s"):
            await link.request(ApiVersionsRequest(), timeout=0.05)
        link.close()
    finally:
        server.close()
        await server.wait_closed()



async def test_the_link_timer_bounds_every_request_it_carries():
    """A request answered, then one never answered (the timer armed for the first is re-armed
    for it), then a long and a short one: each fails at its own bound, and a timeout closes
    the link."""
    server, port = await _silent_server()
    try:
        link = await UpstreamClient.connect([("127.0.0.1", port)])
        answered = asyncio.create_task(link.request(ApiVersionsRequest(), timeout=0.05))
        await asyncio.sleep(0)
        (future, *_), = link._pending.values()
        future.set_result("answer")
        link._pending.clear()
        assert await answered == "answer"
        async with asyncio.timeout(10):         # a bound far above the request's: no hang
            with pytest.raises(UpstreamError, match="timed out after 0.05s"):
                await link.request(ApiVersionsRequest(), timeout=0.05)
        assert link._transport is not None and link._transport.is_closing()
        link = await UpstreamClient.connect([("127.0.0.1", port)])
        long = asyncio.create_task(link.request(ApiVersionsRequest(), timeout=60))
        await asyncio.sleep(0)
        async with asyncio.timeout(10):
            with pytest.raises(UpstreamError, match="timed out after 0.05s"):
                await link.request(ApiVersionsRequest(), timeout=0.05)
            with pytest.raises(UpstreamError, match="lost"):
                await long                      # the link closed: the long one fails too
        assert link._pending == {} and link._timer is None
    finally:
        server.close()
        await server.wait_closed()


class _Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def close(self) -> None: ...


@pytest.mark.parametrize("client_id", ["kcoord-state", None, ""])
async def test_each_request_frame_is_the_header_encoders_and_the_body_encoders(client_id):
    """The header kept per request class (`UpstreamClient._kind`) writes the bytes
    RequestHeader.encode writes for every correlation id: header v1 and v2 (flexible), with
    and without a client id."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
    from kio.schema.metadata.v9.request import MetadataRequest

    from coordinator.protocol.apis import request_header_version
    from coordinator.protocol.codec import encode_body
    from coordinator.protocol.framing import SIZE, RequestHeader

    link = UpstreamClient(("127.0.0.1", 1), client_id)     # type: ignore[arg-type]
    transport = _Transport()
    link.connection_made(transport)                         # type: ignore[arg-type]
    requests = [ApiVersionsRequest(), ApiVersionsV3(client_software_name="kcoord", client_software_version="1"),
                MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                include_cluster_authorized_operations=False,
                                include_topic_authorized_operations=False)] * 2
    for request in requests:
        link.send(request, timeout=None)
    for correlation_id, (request, frame) in enumerate(zip(requests, transport.written), start=1):
        api_key, version = int(request.__api_key__), int(request.__version__)
        payload = RequestHeader(api_key, version, correlation_id, client_id).encode(
            request_header_version(api_key, version)) + encode_body(request)
        assert frame == SIZE.pack(len(payload)) + payload
    assert link._timer is None                              # no timeout, no timer
