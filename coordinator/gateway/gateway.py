"""The Kafka-protocol gateway: listeners, the dispatch table, and the cluster view.

Clients bootstrap on the gateway. Group APIs are served by the GroupService; every other
API is forwarded unchanged to an upstream broker, except that responses naming brokers
are rewritten so clients only ever see gateway addresses.

The gateway also holds what its connections share: the limits (limits.py) with their
admission check and one periodic idle sweep, the process-wide request queue, the
state-topic guard (state_guard.py), and the rate-limited loggers for what a client can
trigger at will.

Listeners (listeners.py): one or more Kafka listeners, each with its bootstrap
and per-broker ports, its security protocol and its advertised host. A connection on a
listener sees the gateway through that listener (``_ListenerView``): the broker addresses
its answers name are that listener's. A TLS listener accepts its connections itself
(``_accept_tls``) so that each handshake uses the listener's current SSLContext
(certificates reload without a restart) and a failed one is seen; then ``_TlsAccepted``
hands the connection over. Failed handshakes count in ``kcoord_tls_handshake_failures_total``.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import ssl
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .. import metrics
from ..authz import ForwardGate
from ..config import CoordinatorConfig
from ..group.offsets.txn_features import clamp_transaction_version
from ..protocol.api_versions import Features, advertised_versions, api_versions_body, merge_features
from ..protocol.apis import API_VERSIONS, FIND_COORDINATOR, PRODUCE, TXN_OFFSET_COMMIT
from ..protocol.find_coordinator import Node
from ..protocol.framing import DEFAULT_MAX_FRAME_SIZE
from ..protocol.service import GroupService
from ..security.listener_metrics import CONNECTIONS, TLS_HANDSHAKE_FAILURES, TLS_RELOADS
from ..security.principal_mapping import NoMatchingRule
from ..security.tls import ListenerSecurity, check_server_ssl_names
from ..security.upstream import UpstreamSecurity
from .cluster import DEFAULT_REFRESH_INTERVAL, Broker, ClusterView
from .connection import ClientConnection
from .leader_endpoints import forwarded_versions
from .limits import CREATION_RATE, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, Limits
from .listeners import (
    BOOTSTRAP,
    ListenerInfo,
    ListenerSpec,
    advertised_host_for,
    bind_listening_socket,
    broker_listener_name,
    initial_broker_ports,
    parse_addresses,
    parse_advertised_hosts,
    parse_listener_specs,
    parse_protocol_map,
)
from .ratelog import RateLimitedLog
from .routes import Route, build_routes
from .safeguards import Safeguards, process_rules
from .state_guard import StateTopicGuard

log = logging.getLogger("kcoord.gateway")

_PORT_ATTEMPTS = 100   # ports tried for a broker that appears while running
_ACCEPT_RETRY_S = 0.1  # a TLS listener's accept failed (EMFILE...): try again after this
_ZERO_UUID = uuid.UUID(int=0)
_REJECTED = {r: metrics.GATEWAY_CONNECTIONS_REJECTED.labels(reason=r)
             for r in (MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, CREATION_RATE)}


class _ListenerSet:
    """One Kafka listener: its spec, advertised host, security, and the ports it has."""

    def __init__(self, spec: ListenerSpec, advertised_host: str, security: ListenerSecurity, prefix: str,
                 index: int) -> None:
        self.spec = spec
        self.name = spec.name
        self.protocol = spec.protocol
        self.advertised_host = advertised_host
        self.security = security
        self.prefix = prefix              # "" with one listener, "<NAME>/" with several
        self.index = index
        self.node_listener: dict[int, str] = {}
        self.connections = CONNECTIONS.labels(listener=spec.name, protocol=spec.protocol)
        self.handshake_failures = TLS_HANDSHAKE_FAILURES.labels(listener=spec.name)

    def port_name(self, node_id: int | None) -> str:
        return self.prefix + (BOOTSTRAP if node_id is None else broker_listener_name(node_id))

    def info(self, node_id: int | None, port: int, upstream: tuple[tuple[str, int], ...]) -> ListenerInfo:
        return ListenerInfo(self.port_name(node_id), self.advertised_host, port, node_id, upstream,
                            self.name, self.protocol, self.security if self.security.tls is not None else None)


class Gateway:
    def __init__(
        self,
        service: GroupService,
        upstream: str | Sequence[str | tuple[str, int]],
        listen: str | tuple[str, int] | Sequence[str | tuple[str, int]],
        state_topic: str,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        *,
        advertised_host: str | None = None,
        cluster: ClusterView | None = None,
        metadata_refresh_interval: float = DEFAULT_REFRESH_INTERVAL,
        config: CoordinatorConfig | None = None,
        forward_gate: ForwardGate | None = None,
        security: Mapping[str, str] | None = None,
        upstream_security: UpstreamSecurity | None = None,
    ) -> None:
        self.config = config if config is not None else CoordinatorConfig(state_topic=state_topic)
        self.service = service
        # Asked before each request is forwarded upstream; None forwards all (coordinator/authz.py).
        self.forward_gate = forward_gate
        self.upstream = parse_addresses(upstream)
        # Listeners (listeners.py): ``listen`` is one or more ``[NAME://]host:port``; the
        # security settings (coordinator/security/settings.py, resolved) give the protocol
        # map and each TLS listener's certificates. A bad one raises here (ValueError,
        # SecurityConfigError): kcoord refuses to start.
        self.security_settings: dict[str, str] = dict(security or {})
        specs = parse_listener_specs(listen, parse_protocol_map(
            self.security_settings.get("listener.security.protocol.map")))
        check_server_ssl_names(self.security_settings, [spec.name for spec in specs])
        default_host, per_listener_host = parse_advertised_hosts(advertised_host)
        unknown = set(per_listener_host) - {spec.name for spec in specs}
        if unknown:
            raise ValueError(f"--advertised-host names no listener: {', '.join(sorted(unknown))}")
        self._sets: list[_ListenerSet] = []
        for index, spec in enumerate(specs):
            host = per_listener_host.get(spec.name) or default_host or advertised_host_for(spec.host)
            self._sets.append(_ListenerSet(spec, host,
                                           ListenerSecurity.from_settings(spec.name, spec.protocol,
                                                                          self.security_settings),
                                           "" if len(specs) == 1 else f"{spec.name}/", index))
        self._set_by_name = {lset.name: lset for lset in self._sets}
        primary = self._sets[0]
        self.listen_host, self.listen_port = primary.spec.host, primary.spec.port
        self.advertised_host = primary.advertised_host
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
        # The operator's safeguards, resolved here so that a bad setting refuses to start
        # (ValueError naming the setting) instead of failing at the first admin request.
        self.guard.safeguards = Safeguards(process_rules(self.config), self.security_settings)
        self._sweeper: asyncio.Task[None] | None = None
        self._owns_cluster = cluster is None
        # kcoord's own upstream TLS/SASL (security/upstream.py): the metadata/admin link
        # authenticates as kcoord; forward links only open TLS (clients authenticate on
        # them themselves, SASL passthrough).
        self.upstream_security = upstream_security
        self.upstream_ssl = upstream_security.ssl_context() if upstream_security is not None else None
        self.cluster = cluster or ClusterView(self.upstream, state_topic, refresh_interval=metadata_refresh_interval,
                                              security=upstream_security)
        # Client SASL (gateway/sasl.py) on SASL_* listeners; set in start() once routes exist.
        self._sasl_settings = None
        if any(lset.spec.protocol.startswith("SASL_") for lset in self._sets):
            from .sasl import SaslSettings
            self._sasl_settings = SaslSettings.from_settings(self.security_settings)
        self.connections: set[ClientConnection] = set()
        self.routes: dict[int, Route] = {}
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.features = Features()
        self.api_versions_bodies: dict[int, bytes] = {}
        self._listeners: dict[str, ListenerInfo] = {}
        # The first listener's node -> port name map (``address_of``/``locate_group``
        # without a listener answer for it); each listener has its own (_ListenerSet).
        self._node_listener: dict[int, str] = primary.node_listener
        # What a connection on each listener holds as its gateway: the gateway itself for
        # the first listener, a view naming its own addresses for the others.
        self._views: dict[str, Any] = {lset.name: (self if lset is primary else _ListenerView(self, lset))
                                       for lset in self._sets}
        self._servers: dict[str, asyncio.AbstractServer] = {}
        self._serving: set[asyncio.Task[None]] = set()
        self._orphans: set[asyncio.Task[None]] = set()
        self._handshakes: set[asyncio.Task[None]] = set()
        self._accepting: dict[str, asyncio.Task[None]] = {}   # TLS listeners' accept loops
        self._reloaders: list[asyncio.Task[None]] = []
        self.tls_log = RateLimitedLog(log, rate)      # failed TLS handshakes
        self._started = False
        # Several kcoord processes: the cluster node (coordinator/cluster/node.py)
        # that names shard owners and which instance fronts which upstream broker; None with
        # one process.
        self.peers: Any = None

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Reads upstream (ApiVersions, Metadata), then opens every listener."""
        await self.cluster.start()
        # Produce v10+ and Fetch v16+ are forwarded: their KIP-951 NodeEndpoints are rewritten
        # to gateway addresses on the way back (leader_endpoints.py).
        self.api_versions = forwarded_versions(
            advertised_versions(self.cluster.upstream_api_versions, self.service.api_versions),
            self.cluster.upstream_api_versions)
        # transaction.version 2 (KIP-890) makes Java >= 4.0 producers rely on Produce v12's
        # implicit AddPartitionsToTxn and send TxnOffsetCommit v5: the level is forwarded
        # only while kcoord serves TxnOffsetCommit v5 and forwards Produce v12, else lowered to 1.
        txn_commit = self.api_versions.get(TXN_OFFSET_COMMIT)
        produce = self.api_versions.get(PRODUCE)
        self.features = clamp_transaction_version(merge_features(self.cluster.upstream_features),
                                                  txn_commit[1] if txn_commit else None,
                                                  produce[1] if produce else None)
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
        if self._sasl_settings is not None:
            from .sasl import enable_sasl
            enable_sasl(self, self._sasl_settings)
        try:
            brokers = self.cluster.brokers
            for lset in self._sets:
                self._listen(lset.info(None, lset.spec.port, self.upstream))
                for node_id, port in initial_broker_ports(lset.spec.port, brokers).items():
                    broker = brokers[node_id]
                    self._listen(lset.info(node_id, port, ((broker.host, broker.port),)))
            await asyncio.gather(*list(self._serving))
        except BaseException:
            await self.close()
            raise
        self.cluster.subscribe_brokers(self._on_brokers)
        self._on_brokers(self.cluster.brokers)   # any broker seen while the listeners opened
        loop = asyncio.get_running_loop()
        self._sweeper = loop.create_task(self._sweep(), name="kcoord-gateway-idle-sweep")
        for lset in self._sets:
            if lset.security.tls is not None:
                self._reloaders.append(loop.create_task(self._watch_certificates(lset),
                                                        name=f"kcoord-tls-reload-{lset.name}"))
        self._started = True
        for info in self.listeners:
            log.info("listener %s: %s", info.name, info.describe())
        log.info("upstream connections: %s", self.upstream_security.describe() if self.upstream_security
                 else "PLAINTEXT")

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for task in self._reloaders:
            task.cancel()
        self._reloaders.clear()
        for task in [*self._accepting.values(), *self._handshakes]:
            task.cancel()
        await asyncio.gather(*self._accepting.values(), return_exceptions=True)
        self._accepting.clear()
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
        """For each Kafka listener in order: its bootstrap port, then one per upstream
        broker by node id."""
        order = {lset.name: lset.index for lset in self._sets}
        infos = sorted(self._listeners.values(),
                       key=lambda i: (order.get(i.listener, 0), i.node_id is not None, i.node_id or 0))
        return tuple(infos)

    @property
    def listener_names(self) -> tuple[str, ...]:
        """The Kafka listener names, in ``--listen`` order."""
        return tuple(lset.name for lset in self._sets)

    def listener_security(self, listener: str) -> ListenerSecurity:
        """A Kafka listener's protocol, TLS and principal mapping."""
        return self._set_by_name[listener].security

    def node_addresses(self, listener: str | None = None) -> dict[int, tuple[str, int]]:
        """node id -> the gateway (host, port) fronting it on ``listener`` (default: the first)."""
        name = listener or self._sets[0].name
        return {i.node_id: (i.host, i.port) for i in self._listeners.values()
                if i.node_id is not None and (i.listener == name or i.listener not in self._set_by_name)}

    def _set_of(self, info: ListenerInfo) -> _ListenerSet:
        return self._set_by_name.get(info.listener) or self._sets[0]

    def upstream_of(self, listener: str) -> tuple[tuple[str, int], ...]:
        return self._listeners[listener].upstream

    def _listen(self, info: ListenerInfo) -> ListenerInfo:
        """Binds at once (so the port accepts before any client is told about it) and
        starts serving in the background."""
        lset = self._set_of(info)
        bind_host = lset.spec.host
        try:
            sock = bind_listening_socket(bind_host, info.port)
        except OSError as e:
            raise OSError(e.errno, f"cannot listen on {bind_host}:{info.port} for {info.name}: "
                                   f"{e.strerror or e}") from e
        if info.port == 0:
            info = dataclasses.replace(info, port=sock.getsockname()[1])
        self._listeners[info.name] = info
        if info.node_id is not None:
            lset.node_listener[info.node_id] = info.name
        task = asyncio.get_running_loop().create_task(self._serve(info.name, sock))
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)
        return info

    async def _serve(self, name: str, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        info = self._listeners[name]
        view = self._views.get(info.listener, self)
        if info.security is not None and info.security.tls is not None:
            # TLS: accepted here, so that each connection gets the listener's current
            # SSLContext (reloaded certificates) and a failed handshake is seen.
            task = loop.create_task(self._accept_tls(name, sock, view), name=f"kcoord-accept-{name}")
            self._accepting[name] = task
            return
        try:
            server = await loop.create_server(lambda: ClientConnection(view, self._listeners[name]), sock=sock)
        except BaseException:
            sock.close()
            raise
        self._servers[name] = server

    async def _accept_tls(self, name: str, sock: socket.socket, view: Any) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    conn, _ = await loop.sock_accept(sock)
                except OSError as e:   # out of file descriptors and the like: not a busy loop
                    self.tls_log.log(logging.ERROR, "accepting on %s failed: %s", name, e)
                    await asyncio.sleep(_ACCEPT_RETRY_S)
                    continue
                task = loop.create_task(self._tls_connection(name, conn, view))
                self._handshakes.add(task)
                task.add_done_callback(self._handshakes.discard)
        finally:
            sock.close()

    async def _tls_connection(self, name: str, conn: socket.socket, view: Any) -> None:
        """The handshake (ssl.handshake.timeout.ms), then _TlsAccepted hands over."""
        info = self._listeners[name]
        assert info.security is not None and info.security.tls is not None
        tls = info.security.tls
        try:
            peer = conn.getpeername()
        except OSError:
            peer = ("?", 0)
        conn.setblocking(False)
        loop = asyncio.get_running_loop()
        try:
            # The transport owns the socket from here on, and closes it on failure.
            await loop.connect_accepted_socket(lambda: _TlsAccepted(self, view, info, peer), conn,
                                               ssl=tls.context, ssl_handshake_timeout=tls.config.handshake_timeout)
        except (OSError, TimeoutError, EOFError) as e:   # ssl.SSLError and ConnectionError are OSErrors
            self.handshake_failed(info, peer, e)

    def _broker_listener(self, node_id: int, host: str, port: int, lset: _ListenerSet | None = None) -> ListenerInfo:
        """The listener fronting ``node_id`` on ``lset`` (default: the first listener); a
        new broker gets the next free port."""
        lset = lset or self._sets[0]
        name = lset.node_listener.get(node_id)
        if name is not None:
            info = self._listeners[name]
            if info.upstream != ((host, port),):
                log.info("node %d now advertises %s:%d upstream", node_id, host, port)
                info = self._listeners[name] = dataclasses.replace(info, upstream=((host, port),))
            return info
        next_port = max((i.port for i in self._listeners.values()), default=lset.spec.port) + 1
        for attempt in range(_PORT_ATTEMPTS):
            port_to_try = next_port + attempt if lset.spec.port else 0
            try:
                info = self._listen(lset.info(node_id, port_to_try, ((host, port),)))
            except OSError as e:
                log.debug("port %d for node %d: %s", port_to_try, node_id, e)
                continue
            log.info("listener %s: %s (broker appeared)", info.name, info.describe())
            return info
        raise OSError(f"no free port for node {node_id} in {next_port}-{next_port + _PORT_ATTEMPTS - 1}")

    def _on_brokers(self, brokers: Mapping[int, Broker]) -> None:
        for lset in self._sets:
            for broker in brokers.values():
                try:
                    self._broker_listener(broker.node_id, broker.host, broker.port, lset)
                except OSError as e:
                    log.error("cannot open a listener for node %d on %s: %s", broker.node_id, lset.name, e)

    # --- TLS --------------------------------------------------------------------------

    async def _watch_certificates(self, lset: _ListenerSet) -> None:
        """ssl.reload.interval.ms: new connections get a context read from changed files."""
        tls = lset.security.tls
        assert tls is not None
        ok, failed = TLS_RELOADS.labels(listener=lset.name, outcome="ok"), \
            TLS_RELOADS.labels(listener=lset.name, outcome="failed")
        while True:
            await asyncio.sleep(tls.config.reload_interval)
            failures = tls.reload_failures
            if tls.poll():
                ok.inc()
            elif tls.reload_failures != failures:
                failed.inc()

    def handshake_failed(self, info: ListenerInfo, peer: Any, error: BaseException | str) -> None:
        self._set_of(info).handshake_failures.inc()
        where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
        self.tls_log.log(logging.WARNING, "TLS handshake with %s on %s failed: %s", where, info.name,
                         error if isinstance(error, str) else (_tls_problem(error)))

    # --- what connections ask of the gateway ------------------------------------------

    def keep_until_done(self, task: asyncio.Task[None]) -> None:
        """Holds a GroupService call whose client went away until it finishes."""
        self._orphans.add(task)
        task.add_done_callback(self._orphans.discard)

    def address_of(self, node_id: int, host: str, port: int, lset: _ListenerSet | None = None) -> tuple[str, int]:
        """Rewrites an upstream broker address to its gateway listener (on ``lset``; default
        the first listener)."""
        peers = self.peers
        if peers is not None:
            # Several processes: the instance fronting this broker, the same on every one.
            fronted = peers.front(node_id, (lset or self._sets[0]).name)
            if fronted is not None:
                return fronted
        info = self._broker_listener(node_id, host, port, lset)
        return info.host, info.port

    def coordinator_nodes(self, lset: _ListenerSet | None = None) -> list[tuple[int, str, int]]:
        """The kcoord instances' synthetic coordinator nodes (id, host, port) listed in
        Metadata beside the upstream brokers; none with one process."""
        peers = self.peers
        return [] if peers is None else peers.coordinator_nodes((lset or self._sets[0]).name)

    def locate_group(self, group_id: str, lset: _ListenerSet | None = None) -> Node | None:
        """The gateway node fronting the leader of the group's state-topic partition; None
        (COORDINATOR_NOT_AVAILABLE) also while the service cannot serve that partition (not
        loaded, or failed to load), as Kafka answers for a coordinator still loading."""
        partition = self.service.partition_for(group_id)
        peers = self.peers
        if peers is not None:
            # Several processes: the shard's owner, wherever it runs (None while it moves).
            return peers.locate(partition, (lset or self._sets[0]).name)
        available = getattr(self.service, "partition_available", None)
        if available is not None and not available(partition):
            return None
        leader = self.cluster.state_partition_leader(partition)
        if leader is None:
            return None
        name = (lset.node_listener if lset is not None else self._node_listener).get(leader)
        if name is None:
            broker = self.cluster.brokers.get(leader)
            if broker is None:
                return None
            info = self._broker_listener(leader, broker.host, broker.port, lset)
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
            info = self._listeners.get(listener)
            (self._set_of(info) if info is not None else self._sets[0]).connections.inc()
            return True
        _REJECTED[reason].inc()
        self.limit_log.log(logging.WARNING, "refusing connection from %s:%d on %s: over %s",
                           ip, port, listener, _LIMIT_TEXT[reason](self.limits))
        return False

    def release(self, connection: ClientConnection) -> None:
        self.connections.discard(connection)
        self.limits.release(connection.peer[0])
        info = self._listeners.get(connection.listener_name)
        (self._set_of(info) if info is not None else self._sets[0]).connections.dec()

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


class _ListenerView:
    """The gateway as a connection on a listener other than the first sees it: the gateway
    itself, except that the broker addresses it names (Metadata, FindCoordinator,
    DescribeCluster... rewritten on the way back, and FindCoordinator(GROUP) answered here)
    are its own listener's."""

    __slots__ = ("_gateway", "_set")

    def __init__(self, gateway: Gateway, lset: _ListenerSet) -> None:
        self._gateway = gateway
        self._set = lset

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gateway, name)

    def address_of(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        return self._gateway.address_of(node_id, host, port, self._set)

    def locate_group(self, group_id: str) -> Node | None:
        return self._gateway.locate_group(group_id, self._set)

    def coordinator_nodes(self) -> list[tuple[int, str, int]]:
        return self._gateway.coordinator_nodes(self._set)


def _tls_problem(error: BaseException) -> str:
    if isinstance(error, ssl.SSLError):
        return getattr(error, "reason", None) or str(error)
    if isinstance(error, TimeoutError):
        return "timed out"
    return str(error) or type(error).__name__


class _TlsAccepted(asyncio.Protocol):
    """The application protocol of a TLS connection until its handshake is done: then it
    checks the client certificate's principal (one no mapping rule maps is refused, as
    Kafka fails its authentication), and hands the TLS transport to a ClientConnection,
    which gets every later callback directly."""

    def __init__(self, gateway: Gateway, view: Any, info: ListenerInfo, peer: Any) -> None:
        self._gateway = gateway
        self._view = view
        self._info = info
        self._peer = peer
        self.connection: ClientConnection | None = None

    def connection_made(self, transport: Any) -> None:
        info = self._info
        try:
            info.principal_of(transport)
        except NoMatchingRule as e:
            transport.abort()
            self._gateway.handshake_failed(info, self._peer, str(e))
            return
        connection = self.connection = ClientConnection(self._view, info)
        transport.set_protocol(connection)
        connection.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.connection is not None:
            self.connection.data_received(data)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.connection is not None:
            self.connection.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.connection is not None:
            self.connection.pause_writing()

    def resume_writing(self) -> None:
        if self.connection is not None:
            self.connection.resume_writing()
