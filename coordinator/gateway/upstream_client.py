"""A minimal async Kafka client on one upstream connection: kio request in, kio response out.

Used for the gateway's own traffic (ApiVersions, Metadata refreshes, CreateTopics), not
for forwarding client requests (see connection.py for that).
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Sequence
from typing import Any

from ..protocol.apis import API_VERSIONS, api_name, request_header_version, response_class, response_header_version
from ..protocol.codec import BodyError, decode_body, encode_body
from ..protocol.framing import SIZE, RequestHeader, decode_response_header, split_frames

log = logging.getLogger("kcoord.gateway.upstream")

_MAX_RESPONSE = 2**31 - 1


class UpstreamError(Exception):
    """The upstream connection failed or answered something unreadable."""


class UpstreamClient(asyncio.Protocol):
    def __init__(self, address: tuple[str, int], client_id: str) -> None:
        self.address = address
        self.client_id = client_id
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._pending: dict[int, tuple[asyncio.Future[Any], int, int]] = {}
        self._correlation = itertools.count(1)
        self._lost: Exception | None = None
        self._closed_here = False

    # --- connecting -------------------------------------------------------------------

    @classmethod
    async def connect(cls, addresses: Sequence[tuple[str, int]], client_id: str = "kcoord-gateway",
                      timeout: float = 5.0) -> UpstreamClient:
        """Connects to the first address that accepts; raises UpstreamError if none does."""
        loop = asyncio.get_running_loop()
        errors = []
        for host, port in addresses:
            client = cls((host, port), client_id)
            try:
                await asyncio.wait_for(loop.create_connection(lambda c=client: c, host, port), timeout)  # type: ignore[misc]
                return client
            except (TimeoutError, OSError) as e:
                errors.append(f"{host}:{port}: {e or type(e).__name__}")
        raise UpstreamError("no upstream broker reachable: " + "; ".join(errors))

    @property
    def closed(self) -> bool:
        return self._transport is None or self._lost is not None

    @property
    def lost(self) -> Exception | None:
        """Why the upstream ended the connection (it closed it, reset it, sent garbage);
        None while it is open or when kcoord closed it itself."""
        return None if self._closed_here else self._lost

    def close(self) -> None:
        if self._lost is None:
            self._closed_here = True
        if self._transport is not None:
            self._transport.close()

    # --- requests ---------------------------------------------------------------------

    async def request(self, request: Any, timeout: float = 10.0) -> Any:
        """Send a kio request at its class's version and wait for the decoded response."""
        if self.closed:
            raise UpstreamError(f"connection to {self._where()} is closed")
        api_key, api_version = int(request.__api_key__), int(request.__version__)
        correlation_id = next(self._correlation)
        header = RequestHeader(api_key, api_version, correlation_id, self.client_id)
        payload = header.encode(request_header_version(api_key, api_version)) + encode_body(request)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (future, api_key, api_version)
        assert self._transport is not None
        self._transport.write(SIZE.pack(len(payload)) + payload)
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._pending.pop(correlation_id, None)
            # Responses come in order: a lost one means the connection is unusable.
            self.close()
            raise UpstreamError(f"{api_name(api_key)} v{api_version} to {self._where()} timed out "
                                f"after {timeout}s") from None

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._buf += data
        frames, used, error = split_frames(self._buf, _MAX_RESPONSE)
        del self._buf[:used]
        for frame in frames:
            self._complete(frame)
        if error is not None:
            self._fail(UpstreamError(f"bad frame from {self._where()}: {error}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(UpstreamError(f"connection to {self._where()} lost" + (f": {exc}" if exc else "")))

    def _complete(self, frame: bytes) -> None:
        (correlation_id,) = SIZE.unpack_from(frame, 4)
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            return  # answer to a request that already timed out
        future, api_key, api_version = entry
        if future.done():
            return
        try:
            future.set_result(_decode(frame, api_key, api_version))
        except (BodyError, ValueError) as e:
            future.set_exception(UpstreamError(f"{api_name(api_key)} v{api_version} response from "
                                               f"{self._where()} does not parse: {e}"))

    def _fail(self, error: Exception) -> None:
        if self._lost is None:
            self._lost = error
        pending, self._pending = self._pending, {}
        for future, _, _ in pending.values():
            if not future.done():
                future.set_exception(error)
        self.close()

    def _where(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"


def _decode(frame: bytes, api_key: int, api_version: int) -> Any:
    _, offset = decode_response_header(frame, response_header_version(api_key, api_version))
    try:
        return decode_body(response_class(api_key, api_version), frame, offset)
    except BodyError:
        # A broker that does not know our ApiVersions version answers UNSUPPORTED_VERSION
        # in the v0 format (KIP-511).
        if api_key == API_VERSIONS and api_version > 0:
            return decode_body(response_class(API_VERSIONS, 0), frame, offset)
        raise
