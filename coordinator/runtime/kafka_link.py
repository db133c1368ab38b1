"""A minimal Kafka link for the runtime: one connection, kio request in, kio response out,
pipelined by correlation id. PLAINTEXT (or TLS with an ``ssl.SSLContext``), no SASL.

`fenced_state_log.FencedStateLog` takes an ``open_link`` callable; the service passes
`coordinator.gateway.upstream_client.UpstreamClient.connect` (TLS, SASL, KIP-368), which the
runtime may not import (import-linter). This one is the default for tests, benchmarks and
unauthenticated upstreams.
"""
from __future__ import annotations

import asyncio
import itertools
import ssl
from collections.abc import Sequence
from typing import Any

from ..protocol.apis import request_header_version, response_class, response_header_version
from ..protocol.codec import decode_body, encode_body
from ..protocol.framing import SIZE, RequestHeader, decode_response_header

# A state-topic fetch answer is bounded by the fetch's max bytes; anything near 1 GiB is broken.
MAX_RESPONSE_BYTES = 1 << 30


class LinkError(Exception):
    """The connection failed, was closed, or a request timed out."""


class KafkaLink:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, address: tuple[str, int],
                 client_id: str) -> None:
        self._reader, self._writer = reader, writer
        self.address = address
        self.client_id = client_id
        self._correlation = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.Future[Any], int, int]] = {}
        self._error: Exception | None = None
        self._task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(cls, addresses: Sequence[tuple[str, int]], client_id: str = "kcoord-state",
                      timeout: float = 5.0, ssl_context: ssl.SSLContext | None = None) -> KafkaLink:
        errors = []
        for host, port in addresses:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port, ssl=ssl_context,
                                            server_hostname=host if ssl_context else None), timeout)
            except (OSError, TimeoutError) as e:
                errors.append(f"{host}:{port}: {e or type(e).__name__}")
                continue
            return cls(reader, writer, (host, port), client_id)
        raise LinkError("no broker reachable: " + "; ".join(errors))

    @property
    def closed(self) -> bool:
        return self._error is not None or self._writer.is_closing()

    def close(self) -> None:
        self._fail(LinkError(f"connection to {self._where()} closed"))

    async def request(self, request: Any, timeout: float = 30.0) -> Any:
        if self.closed:
            raise LinkError(f"connection to {self._where()} is closed")
        api_key, version = int(request.__api_key__), int(request.__version__)
        correlation = next(self._correlation)
        payload = (RequestHeader(api_key, version, correlation, self.client_id)
                   .encode(request_header_version(api_key, version)) + encode_body(request))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation] = (future, api_key, version)
        self._writer.write(SIZE.pack(len(payload)) + payload)
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._fail(LinkError(f"request {api_key} v{version} to {self._where()} timed out after {timeout}s"))
            raise LinkError(f"request {api_key} v{version} to {self._where()} timed out") from None

    async def _read(self) -> None:
        try:
            while True:
                (size,) = SIZE.unpack(await self._reader.readexactly(4))
                # The size comes from the upstream: bound it before reading (or allocating) that much.
                if not 4 <= size <= MAX_RESPONSE_BYTES:
                    self._fail(LinkError(f"{self._where()} sent a response of {size} bytes; expected 4 to "
                                         f"{MAX_RESPONSE_BYTES}"))
                    return
                frame = SIZE.pack(size) + await self._reader.readexactly(size)
                (correlation,) = SIZE.unpack_from(frame, 4)
                entry = self._pending.pop(correlation, None)
                if entry is None:
                    continue
                future, api_key, version = entry
                if future.done():
                    continue
                try:
                    _, at = decode_response_header(frame, response_header_version(api_key, version))
                    future.set_result(decode_body(response_class(api_key, version), frame, at))
                except Exception as e:
                    future.set_exception(LinkError(f"response {api_key} v{version} does not parse: {e}"))
        except (asyncio.IncompleteReadError, OSError) as e:
            self._fail(LinkError(f"connection to {self._where()} lost: {e}"))
        except asyncio.CancelledError:
            pass

    def _fail(self, error: Exception) -> None:
        if self._error is None:
            self._error = error
        pending, self._pending = self._pending, {}
        for future, _, _ in pending.values():
            if not future.done():
                future.set_exception(error)
                future.exception()
        self._writer.close()
        if not self._task.done() and self._task is not asyncio.current_task():
            self._task.cancel()

    def _where(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"


async def open_plain_link(addresses: Sequence[tuple[str, int]]) -> KafkaLink:
    """`FencedStateLog`'s default ``open_link``: PLAINTEXT, no SASL."""
    return await KafkaLink.connect(addresses)
