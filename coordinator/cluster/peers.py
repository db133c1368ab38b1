"""One kcoord instance's links to the other instances of its cluster: the path by which a
request that names groups of another instance's shards reaches that instance (the
per-group configs: service/group_configs.py; docs/user/cluster.md, "Requests for another
instance's groups").

Rules of this module:
- The map is the membership's (node.py `assignment`): a shard's owner is the instance it
  names; a shard it names no owner for is *moving*, and nothing is guessed for it.
- An instance is reached at the bootstrap address it put in the map (its first listener), as
  a client reaches it, over a link opened by ``open_link`` (TLS and SASL as the caller set it
  up: clustered.py; its client id `PEER_CLIENT_ID` only names the link in logs). A request
  travels in an Envelope (API 58, KIP-590; protocol/envelope.py) carrying the client's
  principal, client id and address: the owner checks that the link's principal has Cluster
  CLUSTER_ACTION, authorizes the request as the client, and serves it from its own shards
  only, so two instances whose maps differ for a moment cannot bounce a request between them
  (service/envelope.py).
- One link per instance, opened on first use and pipelined; a failed request closes it (the
  next one opens a new link), and a link whose instance left the map or moved is closed
  when the map changes (`on_map`). A request is bounded by `timeout_s`.
- Failures are `PeerUnavailable`, naming the instance and what failed; the caller answers
  the groups concerned with a retriable error, never a guess.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from ..aio import within
from ..protocol import envelope
from ..protocol.service import ClientInfo
from .protocol import Assignment, Endpoint
from .upstream import Link, OpenLink

log = logging.getLogger("kcoord.cluster")

PEER_CLIENT_ID = "kcoord-peer"


class PeerUnavailable(Exception):
    """Another instance could not answer (no address, unreachable, timed out, refused)."""


class Peers:
    def __init__(self, instance_id: str, node: Any, open_link: OpenLink, timeout_s: float) -> None:
        self.instance_id = instance_id
        self._node = node               # ClusterNode: `assignment` is the current map
        self._open_link = open_link
        self.timeout_s = timeout_s
        self._links: dict[str, tuple[Endpoint, Link]] = {}
        self._opening: dict[str, asyncio.Lock] = {}

    def _map(self) -> Assignment | None:
        return self._node.assignment

    def owner(self, partition: int) -> str | None:
        """The instance that owns ``partition`` in the current map; None: moving, or no map yet."""
        a = self._map()
        return None if a is None else a.owners.get(partition)

    def others(self) -> list[str]:
        """Every other instance in the map, by instance id."""
        a = self._map()
        return [] if a is None else sorted(i for i in a.endpoints if i != self.instance_id)

    def moving(self, partitions: Iterable[int]) -> list[int]:
        """The partitions of ``partitions`` that no instance owns now."""
        return [p for p in partitions if self.owner(p) is None]

    async def ask(self, instance: str, request: Any, client: ClientInfo) -> Any:
        """``request`` (a kio request, sent at its class's version) answered by ``instance``
        for ``client``, in an Envelope; an Envelope the owner refuses is PeerUnavailable."""
        a = self._map()
        endpoint = a.endpoints.get(instance) if a is not None else None
        if endpoint is None:
            raise PeerUnavailable(f"kcoord instance {instance} is not in this instance's cluster map")
        link = await self._link(instance, endpoint)
        wrapped = envelope.wrap(request, client.client_id, client.principal, client.host)
        try:
            answer = await link.request(wrapped, self.timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._close(instance)
            raise PeerUnavailable(f"kcoord instance {instance} at {endpoint.host}:{endpoint.port} did not "
                                  f"answer: {e}") from None
        try:
            return envelope.opened(int(request.__api_key__), int(request.__version__), answer)
        except envelope.EnvelopeError as e:
            hint = " (grant the kcoord instances' principal Cluster CLUSTER_ACTION)" \
                if e.code == ErrorCode.cluster_authorization_failed else ""
            raise PeerUnavailable(f"kcoord instance {instance} at {endpoint.host}:{endpoint.port} refused: "
                                  f"{e}{hint}") from None

    async def _link(self, instance: str, endpoint: Endpoint) -> Link:
        lock = self._opening.setdefault(instance, asyncio.Lock())
        async with lock:
            held = self._links.get(instance)
            if held is not None and held[0] == endpoint and not getattr(held[1], "closed", False):
                return held[1]
            self._close(instance)
            try:
                link = await within(self._open_link([(endpoint.host, endpoint.port)]), self.timeout_s)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                raise PeerUnavailable(f"kcoord instance {instance} at {endpoint.host}:{endpoint.port} cannot be "
                                      f"reached: {e}") from None
            self._links[instance] = (endpoint, link)
            return link

    def on_map(self, assignment: Assignment) -> None:
        """A new map: close the links of instances that left it or moved."""
        for instance, (endpoint, _) in list(self._links.items()):
            if assignment.endpoints.get(instance) != endpoint:
                self._close(instance)

    def close(self) -> None:
        for instance in list(self._links):
            self._close(instance)

    def _close(self, instance: str) -> None:
        held = self._links.pop(instance, None)
        if held is not None:
            held[1].close()
