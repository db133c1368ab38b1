"""The Kafka-protocol gateway: listeners, the dispatch table, and the cluster view.

Clients bootstrap on the gateway. Group APIs are served by the GroupService; every other
API is forwarded unchanged to an upstream broker, except that responses naming brokers
are rewritten so clients only ever see gateway addresses.

The gateway also holds what its connections share: the limits (limits.py) with their
admission check and one periodic idle sweep, the process-wide request queue, the
state-topic guard (state_guard.py), and the rate-limited loggers for what a client can
trigger at will.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import time
import uuid
from collections.abc import Mapping, Sequence

from ..authz import ForwardGate
from ..config import CoordinatorConfig
from ..protocol.api_versions import Features, advertised_versions, api_versions_body, merge_features
from ..protocol.apis import API_VERSIONS, FIND_COORDINATOR
from ..protocol.find_coordinator import Node
from ..protocol.framing import DEFAULT_MAX_FRAME_SIZE
from ..protocol.service import GroupService
from ..runtime import metrics
from .cluster import DEFAULT_REFRESH_INTERVAL, Broker, ClusterView
from .connection import ClientConnection
from .limits import CREATION_RATE, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, Limits
from .listeners import (
    BOOTSTRAP,
    ListenerInfo,
    advertised_host_for,
    bind_listening_socket,
    broker_listener_name,
    initial_broker_ports,
    parse_address,
    parse_addresses,
)
from .ratelog import RateLimitedLog
from .routes import Route, build_routes
from .state_guard import StateTopicGuard

log = logging.getLogger("kcoord.gateway")

_PORT_ATTEMPTS = 100   # ports tried for a broker that appears while running
_ZERO_UUID = uuid.UUID(int=0)
_REJECTED = {r: metrics.GATEWAY_CONNECTIONS_REJECTED.labels(reason=r)
             for r in (MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, CREATION_RATE)}


class Gateway:
    def __init__(
        self,
        service: GroupService,
        upstream: str | Sequence[str | tuple[str, int]],
        listen: str | tuple[str, int],
        state_topic: str,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        *,
        advertised_host: str | None = None,
        cluster: ClusterView | None = None,
        metadata_refresh_interval: float = DEFAULT_REFRESH_INTERVAL,
        config: CoordinatorConfig | None = None,
        forward_gate: ForwardGate | None = None,
    ) -> None:
        self.config = config if config is not None else CoordinatorConfig(state_topic=state_topic)
        self.service = service
        # Asked before each request is forwarded upstream; None forwards all (coordinator/authz.py).
        self.forward_gate = forward_gate
        self.upstream = parse_addresses(upstream)
        self.listen_host, self.listen_port = parse_address(listen)
        self.advertised_host = advertised_host or advertised_host_for(self.listen_host)
        self.state_topic = state_topic
        # socket.request.max.bytes: the config's when one is given (cli passes both).
        self.max_frame_size = config.socket_request_max_bytes if config is not None else max_frame_size
        self.limits = Limits(self.config)
        rate = self.config.bad_request_log_rate_per_second
        self.bad_log = RateLimitedLog(log, rate)       # bad frames
        self.limit_log = RateLimitedLog(log, rate)     # connections refused or closed by a limit
        self.state_log = RateLimitedLog(log, rate)     # requests naming the state topic
        self.upstream_log = RateLimitedLog(log, rate)  # client connections closed for an upstream failure
        self.guard = StateTopicGuard(state_topic, self.state_topic_id, self._state_topic_exists,
                                     max_walked_frame=self.limits.max_decoded_frame)
        self._sweeper: asyncio.Task[None] | None = None
        self._owns_cluster = cluster is None
        self.cluster = cluster or ClusterView(self.upstream, state_topic, refresh_interval=metadata_refresh_interval)
        self.connections: set[ClientConnection] = set()
        self.routes: dict[int, Route] = {}
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.features = Features()
        self.api_versions_bodies: dict[int, bytes] = {}
        self._listeners: dict[str, ListenerInfo] = {}
        self._node_listener: dict[int, str] = {}
        self._servers: dict[str, asyncio.AbstractServer] = {}
        self._serving: set[asyncio.Task[None]] = set()
        self._orphans: set[asyncio.Task[None]] = set()
        self._started = False

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Reads upstream (ApiVersions, Metadata), then opens every listener."""
        await self.cluster.start()
        self.api_versions = advertised_versions(self.cluster.upstream_api_versions, self.service.api_versions)
        self.features = merge_features(self.cluster.upstream_features)
        # A service may also answer APIs it does not advertise (e.g. a request it refuses
        # cleanly rather than by closing the connection); they are routed, not advertised.
        answered = {k: v for k, v in getattr(self.service, "answered_versions", {}).items()
                    if k not in self.api_versions}
        routable = {**self.api_versions, **answered}
        served = ((set(self.service.api_versions) & set(self.api_versions)) | set(answered)) \
            - {FIND_COORDINATOR, API_VERSIONS}
        self.routes = build_routes(routable, served)
        low, high = self.api_versions[API_VERSIONS]
        self.api_versions_bodies = {v: api_versions_body(v, self.api_versions, self.features)
                                    for v in range(low, high + 1)}
        try:
            self._listen(ListenerInfo(BOOTSTRAP, self.advertised_host, self.listen_port, None, self.upstream))
            brokers = self.cluster.brokers
            for node_id, port in initial_broker_ports(self.listen_port, brokers).items():
                broker = brokers[node_id]
                self._listen(ListenerInfo(broker_listener_name(node_id), self.advertised_host, port, node_id,
                                          ((broker.host, broker.port),)))
            await asyncio.gather(*list(self._serving))
        except BaseException:
            await self.close()
            raise
        self.cluster.subscribe_brokers(self._on_brokers)
        self._on_brokers(self.cluster.brokers)   # any broker seen while the listeners opened
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep(), name="kcoord-gateway-idle-sweep")
        self._started = True
        for info in self.listeners:
            log.info("listener %s: %s", info.name, info.describe())
        log.info("upstream is PLAINTEXT; SASL and delegation-token APIs are not advertised")

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for task in list(self._serving):   # listeners still starting (e.g. start() failed)
            task.cancel()
        await asyncio.gather(*list(self._serving), return_exceptions=True)
        for server in self._servers.values():
            server.close()
        for connection in list(self.connections):
            connection.abort()
        for server in list(self._servers.values()):
            await server.wait_closed()
        self._servers.clear()
        if self._owns_cluster:
            await self.cluster.close()
        self._started = False

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- listeners --------------------------------------------------------------------

    @property
    def listeners(self) -> tuple[ListenerInfo, ...]:
        """The bootstrap listener, then one per upstream broker by node id."""
        infos = sorted(self._listeners.values(), key=lambda i: (i.node_id is not None, i.node_id or 0))
        return tuple(infos)

    def node_addresses(self) -> dict[int, tuple[str, int]]:
        """node id -> the gateway (host, port) fronting it."""
        return {i.node_id: (i.host, i.port) for i in self._listeners.values() if i.node_id is not None}

    def upstream_of(self, listener: str) -> tuple[tuple[str, int], ...]:
        return self._listeners[listener].upstream

    def _listen(self, info: ListenerInfo) -> ListenerInfo:
        """Binds at once (so the port accepts before any client is told about it) and
        starts serving in the background."""
        try:
            sock = bind_listening_socket(self.listen_host, info.port)
        except OSError as e:
            raise OSError(e.errno, f"cannot listen on {self.listen_host}:{info.port} for {info.name}: "
                                   f"{e.strerror or e}") from e
        if info.port == 0:
            info = dataclasses.replace(info, port=sock.getsockname()[1])
        self._listeners[info.name] = info
        if info.node_id is not None:
            self._node_listener[info.node_id] = info.name
        task = asyncio.get_running_loop().create_task(self._serve(info.name, sock))
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)
        return info

    async def _serve(self, name: str, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            server = await loop.create_server(lambda: ClientConnection(self, self._listeners[name]), sock=sock)
        except BaseException:
            sock.close()
            raise
        self._servers[name] = server

    def _broker_listener(self, node_id: int, host: str, port: int) -> ListenerInfo:
        """The listener fronting ``node_id``; a new broker gets the next free port."""
        name = self._node_listener.get(node_id)
        if name is not None:
            info = self._listeners[name]
            if info.upstream != ((host, port),):
                log.info("node %d now advertises %s:%d upstream", node_id, host, port)
                info = self._listeners[name] = dataclasses.replace(info, upstream=((host, port),))
            return info
        next_port = max((i.port for i in self._listeners.values()), default=self.listen_port) + 1
        for attempt in range(_PORT_ATTEMPTS):
            port_to_try = next_port + attempt if self.listen_port else 0
            try:
                info = self._listen(ListenerInfo(broker_listener_name(node_id), self.advertised_host,
                                                 port_to_try, node_id, ((host, port),)))
            except OSError as e:
                log.debug("port %d for node %d: %s", port_to_try, node_id, e)
                continue
            log.info("listener %s: %s (broker appeared)", info.name, info.describe())
            return info
        raise OSError(f"no free port for node {node_id} in {next_port}-{next_port + _PORT_ATTEMPTS - 1}")

    def _on_brokers(self, brokers: Mapping[int, Broker]) -> None:
        for broker in brokers.values():
            try:
                self._broker_listener(broker.node_id, broker.host, broker.port)
            except OSError as e:
                log.error("cannot open a listener for node %d: %s", broker.node_id, e)

    # --- what connections ask of the gateway ------------------------------------------

    def keep_until_done(self, task: asyncio.Task[None]) -> None:
        """Holds a GroupService call whose client went away until it finishes."""
        self._orphans.add(task)
        task.add_done_callback(self._orphans.discard)

    def address_of(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        """Rewrites an upstream broker address to its gateway listener."""
        info = self._broker_listener(node_id, host, port)
        return info.host, info.port

    def locate_group(self, group_id: str) -> Node | None:
        """The gateway node fronting the leader of the group's state-topic partition; None
        (COORDINATOR_NOT_AVAILABLE) also while the service cannot serve that partition (not
        loaded, or failed to load), as Kafka answers for a coordinator still loading."""
        partition = self.service.partition_for(group_id)
        available = getattr(self.service, "partition_available", None)
        if available is not None and not available(partition):
            return None
        leader = self.cluster.state_partition_leader(partition)
        if leader is None:
            return None
        name = self._node_listener.get(leader)
        if name is None:
            broker = self.cluster.brokers.get(leader)
            if broker is None:
                return None
            info = self._broker_listener(leader, broker.host, broker.port)
        else:
            info = self._listeners[name]
        return Node(leader, info.host, info.port)

    # --- the state topic --------------------------------------------------------------

    def state_topic_id(self) -> uuid.UUID | None:
        """The state topic's id as the cluster view lists it now (None: not listed, or no id)."""
        topic_id = self.cluster.state_topic_id
        return None if topic_id is None or topic_id == _ZERO_UUID else topic_id

    def _state_topic_exists(self) -> bool:
        return self.state_topic in self.cluster.image.topics_by_name

    # --- limits -----------------------------------------------------------------------

    def admit(self, connection: ClientConnection) -> bool:
        """max.connections, max.connections.per.ip, max.connection.creation.rate."""
        ip, port = connection.peer
        listener = connection.listener_name
        reason = self.limits.admit(ip, listener)
        if reason is None:
            return True
        _REJECTED[reason].inc()
        self.limit_log.log(logging.WARNING, "refusing connection from %s:%d on %s: over %s",
                           ip, port, listener, _LIMIT_TEXT[reason](self.limits))
        return False

    def release(self, connection: ClientConnection) -> None:
        self.connections.discard(connection)
        self.limits.release(connection.peer[0])

    def pause_queue(self) -> None:
        """The process-wide queue is over queued.max.requests or queued.max.request.bytes:
        connections holding at least their fair share of it stop reading until answers
        bring it back under. The others go on (their heartbeats are still read): pausing
        every connection would let a few clients with many waiting requests (JoinGroups in
        a rebalance) stop everyone."""
        limits = self.limits
        limits.queue_paused = True
        self.limit_log.log(logging.WARNING, "request queue full (%d requests, %d bytes; queued.max.requests=%d, "
                           "queued.max.request.bytes=%d): reading paused on the connections holding "
                           "their fair share of it",
                           limits.queued_requests, limits.queued_bytes, limits.queued_max_requests,
                           limits.queued_max_request_bytes)
        for connection in list(self.connections):
            connection.queue_paused(True)

    def check_queue(self) -> None:
        limits = self.limits
        if limits.queue_paused and not limits.queue_over():
            limits.queue_paused = False
            for connection in list(self.connections):
                connection.queue_paused(False)

    async def _sweep(self) -> None:
        """connections.max.idle.ms: one sweep every ``Limits.sweep_interval()``, which also
        advances the coarse clock connections stamp their activity with."""
        limits = self.limits
        interval = limits.sweep_interval()
        # Stamps are taken from the coarse clock, up to one interval old: allow for it, so
        # that no connection is closed before it was really idle for the full time.
        idle = limits.idle_seconds + interval
        while True:
            await asyncio.sleep(interval)
            now = limits.now = time.monotonic()
            for connection in list(self.connections):
                connection.sweep(now, idle)


_LIMIT_TEXT = {
    MAX_CONNECTIONS: lambda limits: f"max.connections={limits.max_connections}",
    MAX_CONNECTIONS_PER_IP: lambda limits: f"max.connections.per.ip={limits.max_connections_per_ip}",
    CREATION_RATE: lambda limits: f"max.connection.creation.rate={limits.creation_rate}/s (all listeners)",
}
