"""The contract between the gateway (which owns the sockets) and the GroupService."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """Who sent a request: Kafka's RequestContext in miniature."""

    client_id: str | None
    host: str          # the peer's IP address, as Kafka reports a member's client host
    port: int
    listener: str      # name of the gateway listener the request arrived on
    # Who asks, as Kafka's KafkaPrincipal string: ANONYMOUS until the gateway authenticates
    # clients (coordinator/authz.py asks the authorizer on its behalf).
    principal: str = "User:ANONYMOUS"


@runtime_checkable
class GroupService(Protocol):
    """Serves every group API. The gateway calls it; it never touches a socket.

    ``api_versions`` is exactly what ApiVersions advertises for the group APIs; a group
    API it does not list is neither served nor forwarded.
    """

    @property
    def api_versions(self) -> Mapping[int, tuple[int, int]]: ...

    def partition_for(self, group_id: str) -> int:
        """The state-topic partition that owns ``group_id`` (Java abs(hashCode) % partitions)."""
        ...

    def partition_available(self, partition: int) -> bool:
        """Whether FindCoordinator names a coordinator for that state-topic partition: True
        while its shard serves or loads (a loading shard's group APIs answer
        COORDINATOR_LOAD_IN_PROGRESS, as Kafka's), False after its load failed or once it was
        unloaded (state topic lost); the gateway then answers COORDINATOR_NOT_AVAILABLE for
        its groups. A cheap check."""
        ...

    async def handle(self, api_key: int, api_version: int, request: Any, client: ClientInfo) -> Any:
        """Answer one request.

        ``request`` is the kio request dataclass for (api_key, api_version). Returns the
        kio response dataclass, or ``bytes``: a response body already encoded at that
        version (hot-path escape hatch). Raising closes the client connection.
        """
        ...
