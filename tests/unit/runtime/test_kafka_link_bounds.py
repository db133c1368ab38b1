"""The fenced log's raw link (coordinator/runtime/kafka_link.py) reads sizes from the upstream:
a size outside [4, MAX_RESPONSE_BYTES] fails the link at once, naming the size, instead of
reading (or allocating) it or crashing its reader."""
from __future__ import annotations

import asyncio
import struct

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from coordinator.runtime.kafka_link import KafkaLink, LinkError, MAX_RESPONSE_BYTES


@pytest.mark.parametrize("size", [-1, 0, 3, MAX_RESPONSE_BYTES + 1])
async def test_an_impossible_response_size_fails_the_request_naming_it(size):
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (length,) = struct.unpack(">i", await reader.readexactly(4))
        await reader.readexactly(length)
        writer.write(struct.pack(">i", size) + b"\x00" * 8)
        await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        link = await KafkaLink.connect([("127.0.0.1", port)])
        with pytest.raises(LinkError, match=f"response of {size} bytes"):
            await link.request(ApiVersionsRequest(), timeout=5)
        link.close()
    finally:
        server.close()
