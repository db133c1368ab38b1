"""What each piece of the gateway needs from the piece above it, as typed ports.

Rule: dependencies inside the gateway point one way,

    gateway.py -> connection.py -> forward.py -> ports.py -> routes, limits, protocol/

and nothing below imports what is above it, not even for type checking. The `Gateway`
satisfies `ConnectionServices` and `LinkServices`; a `ClientConnection` satisfies
`Downstream`. Attributes are read-only properties, so that the gateway's own (mutable,
narrower) types satisfy them. A unit test can hand either side a small fake instead of a whole gateway.
(Import-linter checks the direction in CI: the `[tool.importlinter]` contracts in
pyproject.toml.)
"""
from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping, MutableSet, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..authz import ForwardGate
    from ..protocol.find_coordinator import Node
    from ..protocol.service import GroupService
    from .limits import Limits
    from .ratelog import RateLimitedLog
    from .routes import Route
    from .state_guard import StateTopicGuard

Address = tuple[str, int]


class Downstream(Protocol):
    """The client connection an upstream link answers into (forward.UpstreamLink)."""

    held: int                # bytes of answers produced and not yet written to the client
    held_soft_limit: int

    def answered(self, size: int) -> None:
        """A request of `size` bytes left the process-wide queue."""

    def flush(self) -> None:
        """Write every ready answer at the head of the ordered queue."""

    def head_is_local(self) -> bool:
        """The queue's head waits for a locally served answer."""

    def upstream_failed(self, reason: str) -> None:
        """The upstream link broke: close the client, naming why."""

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    @property
    def listener_name(self) -> str:
        """The listener the client connected to (metrics label)."""
        ...


class RefreshableCluster(Protocol):
    def request_refresh(self) -> None: ...


class LinkServices(Protocol):
    """What an upstream link uses of the gateway: limits, address rewriting, the state
    topic's name (answers naming it are filtered) and a metadata refresh."""

    @property
    def limits(self) -> Limits: ...

    @property
    def state_topic(self) -> str: ...

    @property
    def cluster(self) -> RefreshableCluster: ...

    @property
    def upstream_ssl(self) -> ssl.SSLContext | None:
        """TLS for forward links (security/upstream.py), None: PLAINTEXT."""
        ...

    def address_of(self, node_id: int, host: str, port: int) -> Address: ...

    def coordinator_nodes(self) -> list[tuple[int, str, int]]: ...


class ConnectionServices(LinkServices, Protocol):
    """What a client connection uses of the gateway."""

    @property
    def routes(self) -> Mapping[int, Route]: ...

    @property
    def service(self) -> GroupService: ...

    @property
    def max_frame_size(self) -> int: ...

    @property
    def guard(self) -> StateTopicGuard: ...

    @property
    def connections(self) -> MutableSet[Any]: ...

    @property
    def api_versions_bodies(self) -> Mapping[int, bytes]: ...

    @property
    def upstream_log(self) -> RateLimitedLog: ...

    @property
    def bad_log(self) -> RateLimitedLog: ...

    @property
    def limit_log(self) -> RateLimitedLog: ...

    @property
    def state_log(self) -> RateLimitedLog: ...

    @property
    def api_versions(self) -> Mapping[int, tuple[int, int]]: ...

    @property
    def forward_gate(self) -> ForwardGate | None: ...


    def admit(self, connection: Any) -> bool: ...

    def release(self, connection: Any) -> None: ...

    def pause_queue(self) -> None: ...

    def check_queue(self) -> None: ...

    def keep_until_done(self, task: asyncio.Task[None]) -> None: ...

    def upstream_of(self, listener: str) -> Sequence[Address]: ...

    def locate_group(self, group_id: str) -> Node | None: ...
