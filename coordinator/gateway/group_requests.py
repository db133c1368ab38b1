"""The group requests kcoord serves on a client connection, from the frame to the queued
answer (connection.py's part).

Rules:
- a request is decoded by commit_decode's one-pass decoders (the common OffsetCommit
  shapes), else by the codec; what neither decodes goes to the connection's `parse`
  (badinput.py), which decodes it the checked way or refuses it naming the fault (Kafka
  closes a connection whose request does not parse);
- the ClientInfo is built once per client id and kept in the connection's ``info`` (the
  forward gate reads it too); a changed principal clears it (principal_changed);
- the call runs by the service's starter (no coroutine: GroupCoordinatorService.starters),
  else through ``handle`` and eager.start; an answer ready at once is framed (encode_answer,
  as every group call's answer) and queued here, counted in the connection's ``held`` until
  written; a call that waits or fails goes to GroupCalls (group_calls.py).
This is the steady heartbeat's and the commit's path: the connection calls `serve` as it
called its own method before (one call), and what `serve` needs is bound in ``__init__``.
`GroupRequests` reaches its connection only through `Requester`.
"""
from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

from ..protocol.codec import BodyError, decode_request
from ..protocol.framing import HeaderError
from ..protocol.service import ClientInfo
from ..runtime.answer import Answer
from . import commit_decode, eager
from .eager import Done
from .group_calls import GroupCalls, encode_answer
from .responses import ResponseQueue
from .routes import Route

_NO_CLIENT_ID = object()


class Requester(Protocol):
    """What serving group requests uses of the connection."""

    held: int
    info: ClientInfo | None       # of the latest group request (its client id)

    def parse(self, frame: bytes, route: Route, correlation_id: int) -> tuple[str | None, Any] | None:
        """(client id, request), or None after refusing the frame (badinput.py)."""

    def request_info(self, client_id: str | None) -> ClientInfo: ...


class GroupRequests:
    __slots__ = ("_conn", "_service", "_starters", "_fast_decoders", "_loop", "_queue", "_calls", "_parse",
                 "_request_info", "_client_id")

    def __init__(self, conn: Requester, service: Any, loop: asyncio.AbstractEventLoop, queue: ResponseQueue,
                 calls: GroupCalls) -> None:
        self._conn = conn
        self._service = service
        # The service's calls without a coroutine, by API key (GroupCoordinatorService.starters);
        # a service without them is called through ``handle``.
        self._starters: Mapping[int, Any] = getattr(service, "starters", None) or {}
        self._fast_decoders = commit_decode.decoders(self._starters)   # OffsetCommit's one-pass decode
        self._loop = loop
        self._queue = queue
        self._calls = calls
        self._parse, self._request_info = conn.parse, conn.request_info
        self._client_id: Any = _NO_CLIENT_ID     # whose ClientInfo the connection's ``info`` is

    def serve(self, frame: bytes, route: Route, correlation_id: int) -> None:
        # OffsetCommit's one-pass decoder called here, not through _decode_served: one Python
        # call less per commit (commit_decode.decoders: one per OffsetCommit class).
        fast = self._fast_decoders.get(route.request_class)
        parsed = fast(frame, route.request_header_version) if fast is not None else _decode_served(frame, route)
        if parsed is None:
            parsed = self._parse(frame, route, correlation_id)
            if parsed is None:
                return
        client_id, request = parsed
        conn = self._conn
        info = conn.info
        if client_id != self._client_id or info is None:
            self._client_id = client_id
            info = conn.info = self._request_info(client_id)
        start = self._starters.get(route.api_key)
        if start is not None:
            # The answer at once, or the runtime's Answer (or a future) of it: no Task, no coroutine.
            try:
                response = start(route.api_version, request, info)
            except Exception as e:
                self._calls.failed(route, correlation_id, e)
                return
            if response.__class__ is Answer or isinstance(response, asyncio.Future):
                self._calls.waiting(response, route, correlation_id, len(frame))
                return
        else:
            # Run the service at once: most answers need no wait (see eager.py), and those go
            # straight into the queue, written by the flush at the end of this read.
            outcome = eager.start(self._service.handle(route.api_key, route.api_version, request, info), self._loop)
            if outcome.__class__ is not Done or outcome.error is not None:   # type: ignore[union-attr]
                self._calls.outcome(outcome, route, correlation_id, len(frame))
                return
            response = outcome.value   # type: ignore[union-attr]
        try:
            data = encode_answer(route, correlation_id, response)
        except Exception as e:
            self._calls.failed(route, correlation_id, e)
            return
        self._queue.append(data)
        conn.held += len(data)


def _decode_served(frame: bytes, route: Route) -> tuple[str | None, Any] | None:
    """(client id, request) of a group request kcoord serves that commit_decode's one-pass
    decoders do not take, by the codec, or None for the connection's `parse` to decode it
    the checked way or refuse it naming the fault."""
    try:
        # A GROUP route always names its request class (routes.py; parse asserts it).
        return decode_request(route.request_class, frame, route.request_header_version)  # type: ignore[arg-type]
    except (HeaderError, BodyError):
        return None
