"""The state a client connection's mixins share, declared once for the type checker.

`ClientConnection` (connection.py) is assembled from mixins: flow control (flow.py), bad
input (badinput.py) and requests checked against the state topic (guarded.py). Each mixin
reads attributes `ClientConnection.__init__` sets and calls methods other parts define.
`ConnectionState` declares them, so a mixin depends on this module and never imports
connection.py back. The declarations exist for the type checker only: at run time the
class is empty, so nothing here can shadow the real methods in the method resolution order.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .forward import Pending, UpstreamLink
    from .limits import Limits
    from .listeners import ListenerInfo
    from .ports import ConnectionServices
    from .routes import Route
    from .state_guard import StateTopicGuard


class ConnectionState:
    __slots__ = ()

    if TYPE_CHECKING:
        _gateway: ConnectionServices
        _listener: ListenerInfo
        _peer: tuple[str, int]
        _transport: asyncio.Transport | None
        _loop: asyncio.AbstractEventLoop
        _buf: bytearray
        _queue: deque[bytes | Pending]
        _link: UpstreamLink | None
        _limits: Limits
        _guard: StateTopicGuard
        _closing: bool
        _active: float
        _paused: int
        _write_paused: bool
        _max_decoded_frame: int
        q_requests: int
        q_bytes: int

        def data_received(self, data: bytes) -> None: ...

        def abort(self) -> None: ...

        def _answer(self, data: bytes) -> None: ...

        def _forward(self, frame: bytes, pending: Pending | None) -> None: ...

        def _reject(self, what: str, route: Route | None = None, correlation_id: int | None = None,
                    api_key: int | None = None, api_version: int | None = None, *, reason: str = ...) -> None: ...
