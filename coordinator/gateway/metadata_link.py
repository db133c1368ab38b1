"""The cluster view's link to the upstream (ClusterView's part): one UpstreamClient as
kcoord, for Metadata, ApiVersions and CreateTopics.

Rules:
- One link at a time, opened lazily under a lock, to the bootstrap addresses and then to
  every broker the metadata lists (any of them answers Metadata).
- A request that fails closes the link; the next call opens a new one. A link the
  upstream dropped is reported (`on_broken`): the upstream may have restarted.
- KIP-368: a SASL session near its lifetime is replaced by a freshly authenticated link
  before a request is sent on it; the old one closes once its requests are answered.
- The versions asked for are the highest both kio and the upstream speak, capped at the
  caller's preferred version (`version_for`).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..protocol.api_versions import Features, parse_upstream_api_versions
from ..protocol.apis import API_VERSIONS, intersect, kio_version_range, request_class
from ..upstream.client import UpstreamClient, UpstreamError

if TYPE_CHECKING:
    from ..security.upstream import UpstreamSecurity

log = logging.getLogger("kcoord.gateway.cluster")


def build(cls: type, **wanted: Any) -> Any:
    """An instance of a kio class at some version, setting only the fields it has."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in wanted.items() if k in names})


class MetadataLink:
    def __init__(self, bootstrap: Sequence[tuple[str, int]], *, request_timeout: float, client_id: str,
                 security: UpstreamSecurity | None, known: Callable[[], Iterable[tuple[str, int]]],
                 on_broken: Callable[[], None]) -> None:
        self.bootstrap = tuple(bootstrap)
        self.request_timeout = request_timeout
        self.client_id = client_id
        self.security = security
        self._known = known            # the brokers the metadata lists now
        self._on_broken = on_broken
        self.upstream_api_versions: dict[int, tuple[int, int]] = {}
        self.upstream_features = Features()
        self.client: UpstreamClient | None = None
        self._connect_lock = asyncio.Lock()

    async def read_api_versions(self) -> None:
        """The upstream's ApiVersions at v4, whose answer lists every supported feature (v3 leaves
        out those whose minimum is 0, KAFKA-17492); a broker older than v4 answers
        UNSUPPORTED_VERSION with its range (KIP-511) and is asked again at its highest."""
        software = {"client_software_name": "kcoord", "client_software_version": "0.1.0"}
        response = await self.call(build(request_class(API_VERSIONS, 4), **software))
        if response.error_code == 35:
            highest = max((k.max_version for k in response.api_keys if k.api_key == API_VERSIONS), default=0)
            version = min(highest, 3)
            response = await self.call(build(request_class(API_VERSIONS, version),
                                             **(software if version >= 3 else {})))
        if response.error_code != 0:
            raise UpstreamError(f"upstream ApiVersions failed with error {int(response.error_code)}")
        self.upstream_api_versions, self.upstream_features = parse_upstream_api_versions(response)

    def version_for(self, api_key: int, preferred: int) -> int:
        known = kio_version_range(api_key)
        upstream = self.upstream_api_versions.get(api_key)
        assert known is not None
        both = intersect(upstream, (known[0], min(known[1], preferred))) if upstream else None
        if both is None:
            raise UpstreamError(f"upstream supports no usable version of API {api_key} (it has {upstream})")
        return both[1]

    async def call(self, request: Any, timeout: float | None = None) -> Any:
        client = await self._connected()
        try:
            return await client.request(request, timeout or self.request_timeout)
        except UpstreamError:
            client.close()
            raise

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    async def _connected(self) -> UpstreamClient:
        async with self._connect_lock:
            if self.client is not None and self.client.lost is not None:
                # The upstream dropped the connection: it may have restarted, so a state topic
                # that is missing on the next answer is more likely a fresh cluster.
                self._on_broken()
                log.info("connection to the upstream broke (%s); reconnecting", self.client.lost)
                self.client = None
            if self.client is not None and not self.client.closed and self.client.reauthentication_due:
                # KIP-368: the SASL session nears its lifetime. A new, freshly authenticated
                # link replaces this one, which closes once its requests are answered.
                log.debug("SASL session with %s:%d nears its lifetime (%d ms): reconnecting",
                          *self.client.address, self.client.session_lifetime_ms)
                self.client.retire()
                self.client = None
            if self.client is None or self.client.closed:
                candidates = list(dict.fromkeys([*self.bootstrap, *self._known()]))
                self.client = await UpstreamClient.connect(candidates, self.client_id, security=self.security)
            return self.client
