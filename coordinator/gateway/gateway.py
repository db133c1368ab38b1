"""The Kafka-protocol gateway: listeners, the dispatch table, and the cluster view.

Clients bootstrap on the gateway. Group APIs are served by the GroupService; every other
API is forwarded unchanged to an upstream broker, except that responses naming brokers
are rewritten so clients only ever see gateway addresses.

The gateway wires its parts and holds what its connections share: the limits (limits.py),
the state-topic guard (state_guard.py), and the rate-limited loggers for what a client can
trigger at will. The parts, each an object of its own:
- the ports (listener_table.py): one or more Kafka listeners (listeners.py), each with its
  bootstrap and per-broker ports, its security protocol and its advertised host;
- accepting on them (acceptor.py): plain ports through asyncio's server, TLS ports with a
  handshake of their own (certificates reload without a restart);
- the open connections (connection_registry.py): admission limits, the process-wide
  request queue's fair-share pause, the idle sweep.
The gateway keeps the lifecycle (start, close), the API versions it advertises and the
address rewriting. A connection on a listener sees the gateway through that listener
(``_ListenerView``): the broker addresses its answers name are that listener's.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..authz import ForwardGate
from ..config import CoordinatorConfig
from ..group.offsets.txn_features import clamp_transaction_version
from ..protocol.api_table import without_topic_ids
from ..protocol.api_versions import (
    Features,
    advertised_versions,
    api_versions_bodies,
    merge_features,
    with_consistent_epoch,
)
from ..protocol.apis import API_VERSIONS, FIND_COORDINATOR, METADATA, PRODUCE, TXN_OFFSET_COMMIT
from ..protocol.find_coordinator import Node
from ..protocol.framing import DEFAULT_MAX_FRAME_SIZE
from ..protocol.service import GroupService
from ..security.tls import ListenerSecurity, check_server_ssl_names
from ..security.upstream import UpstreamSecurity
from .acceptor import Acceptor
from .cluster import DEFAULT_REFRESH_INTERVAL, ClusterView
from .connection_registry import ConnectionRegistry
from .leader_endpoints import forwarded_versions
from .limits import Limits
from .listener_table import ListenerSet, ListenerTable
from .listeners import (
    ListenerInfo,
    advertised_host_for,
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

_ZERO_UUID = uuid.UUID(int=0)


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
        sets = [ListenerSet(spec, per_listener_host.get(spec.name) or default_host or advertised_host_for(spec.host),
                            ListenerSecurity.from_settings(spec.name, spec.protocol, self.security_settings),
                            "" if len(specs) == 1 else f"{spec.name}/", index)
                for index, spec in enumerate(specs)]
        # The parts: the ports (listener_table.py), accepting on them (acceptor.py), the
        # connections and their shared limits (connection_registry.py). What connections
        # call is bound here, so a delegation costs no extra call.
        table = self._table = ListenerTable(sets, self._serve)
        self._sets = sets                         # read by sasl.enable_sasl
        self._listeners = table.infos             # port name -> ListenerInfo
        primary = sets[0]
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
        registry = self.registry = ConnectionRegistry(self.limits, table, self.limit_log)
        self.connections = registry.connections
        self.admit, self.release, self.keep_until_done = registry.admit, registry.release, registry.keep_until_done
        self.pause_queue, self.check_queue = registry.pause_queue, registry.check_queue
        self._orphans = registry.orphans
        self.acceptor = Acceptor(table, lambda listener: self._views.get(listener, self),
                                 RateLimitedLog(log, rate))    # failed TLS handshakes
        self.routes: dict[int, Route] = {}
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.features = Features()
        self.api_versions_bodies: dict[int, bytes] = {}
        # The first listener's node -> port name map (``address_of``/``locate_group``
        # without a listener answer for it); each listener has its own (ListenerSet).
        self._node_listener: dict[int, str] = primary.node_listener
        # What a connection on each listener holds as its gateway: the gateway itself for
        # the first listener, a view naming its own addresses for the others.
        self._views: dict[str, Any] = {lset.name: (self if lset is primary else _ListenerView(self, lset))
                                       for lset in sets}
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
        rows = getattr(self.service, "apis", None)     # the service's rows of the API table
        service_versions = self.service.api_versions
        metadata = self.cluster.upstream_api_versions.get(METADATA)
        if rows is not None and (metadata is None or metadata[1] < 10):
            # Metadata names topic ids from v10 (KIP-516): without them, the group APIs that
            # name topics by id (OffsetCommit/OffsetFetch v10, TxnOffsetCommit v6) stop below.
            service_versions = without_topic_ids(service_versions, rows)
        self.api_versions = forwarded_versions(
            advertised_versions(self.cluster.upstream_api_versions, service_versions),
            self.cluster.upstream_api_versions)
        # transaction.version 2 (KIP-890) makes Java >= 4.0 producers rely on Produce v12's
        # implicit AddPartitionsToTxn and send TxnOffsetCommit v5: the level is forwarded
        # only while kcoord serves TxnOffsetCommit v5 and forwards Produce v12, else lowered to 1.
        txn_commit = self.api_versions.get(TXN_OFFSET_COMMIT)
        produce = self.api_versions.get(PRODUCE)
        # The epoch last, from the final map: the same in every kcoord process that finalizes
        # the same features (api_versions.with_consistent_epoch).
        self.features = with_consistent_epoch(clamp_transaction_version(
            merge_features(self.cluster.upstream_features),
            txn_commit[1] if txn_commit else None, produce[1] if produce else None))
        # A service may also answer APIs it does not advertise (e.g. a request it refuses
        # cleanly rather than by closing the connection); they are routed, not advertised.
        answered = {k: v for k, v in getattr(self.service, "answered_versions", {}).items()
                    if k not in self.api_versions}
        routable = {**self.api_versions, **answered}
        served = ((set(self.service.api_versions) & set(self.api_versions)) | set(answered)) \
            - {FIND_COORDINATOR, API_VERSIONS}
        self.routes = build_routes(routable, served if rows is None else {k: rows[k] for k in served})
        self.api_versions_bodies = api_versions_bodies(self.api_versions, self.features)
        if self._sasl_settings is not None:
            from .sasl import enable_sasl
            enable_sasl(self, self._sasl_settings)
        try:
            brokers = self.cluster.brokers
            for lset in self._sets:
                self._table.listen(lset.info(None, lset.spec.port, self.upstream))
                for node_id, port in initial_broker_ports(lset.spec.port, brokers).items():
                    broker = brokers[node_id]
                    self._table.listen(lset.info(node_id, port, ((broker.host, broker.port),)))
            await asyncio.gather(*list(self._table.serving))
        except BaseException:
            await self.close()
            raise
        self.cluster.subscribe_brokers(self._table.on_brokers)
        self._table.on_brokers(self.cluster.brokers)   # any broker seen while the listeners opened
        self.registry.start_sweeping()
        self.acceptor.watch_certificates()
        self._started = True
        for info in self.listeners:
            log.info("listener %s: %s", info.name, info.describe())
        log.info("upstream connections: %s", self.upstream_security.describe() if self.upstream_security
                 else "PLAINTEXT")

    async def close(self) -> None:
        self.registry.stop_sweeping()
        await self.acceptor.stop_accepting()
        serving = self._table.serving
        for task in list(serving):   # listeners still starting (e.g. start() failed)
            task.cancel()
        await asyncio.gather(*list(serving), return_exceptions=True)
        servers = self.acceptor.servers
        for server in servers.values():
            server.close()
        self.registry.abort_all()
        for server in list(servers.values()):
            await server.wait_closed()
        servers.clear()
        if self._owns_cluster:
            await self.cluster.close()
        self._started = False

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- listeners (listener_table.py) --------------------------------------------------

    @property
    def listeners(self) -> tuple[ListenerInfo, ...]:
        """For each Kafka listener in order: its bootstrap port, then one per upstream
        broker by node id."""
        return self._table.listeners

    @property
    def listener_names(self) -> tuple[str, ...]:
        """The Kafka listener names, in ``--listen`` order."""
        return tuple(lset.name for lset in self._sets)

    def listener_security(self, listener: str) -> ListenerSecurity:
        """A Kafka listener's protocol, TLS and principal mapping."""
        return self._table.by_name[listener].security

    def node_addresses(self, listener: str | None = None) -> dict[int, tuple[str, int]]:
        """node id -> the gateway (host, port) fronting it on ``listener`` (default: the first)."""
        return self._table.node_addresses(listener)

    def upstream_of(self, listener: str) -> tuple[tuple[str, int], ...]:
        return self._listeners[listener].upstream

    async def _serve(self, name: str, sock: socket.socket) -> None:
        await self.acceptor.serve(name, sock)

    # --- what connections ask of the gateway ------------------------------------------

    def address_of(self, node_id: int, host: str, port: int, lset: ListenerSet | None = None) -> tuple[str, int]:
        """Rewrites an upstream broker address to its gateway listener (on ``lset``; default
        the first listener)."""
        peers = self.peers
        if peers is not None:
            # Several processes: the instance fronting this broker, the same on every one.
            fronted = peers.front(node_id, (lset or self._sets[0]).name)
            if fronted is not None:
                return fronted
        info = self._table.broker_listener(node_id, host, port, lset)
        return info.host, info.port

    def coordinator_nodes(self, lset: ListenerSet | None = None) -> list[tuple[int, str, int]]:
        """The kcoord instances' synthetic coordinator nodes (id, host, port) listed in
        Metadata beside the upstream brokers; none with one process."""
        peers = self.peers
        return [] if peers is None else peers.coordinator_nodes((lset or self._sets[0]).name)

    def locate_group(self, group_id: str, lset: ListenerSet | None = None) -> Node | None:
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
            info = self._table.broker_listener(leader, broker.host, broker.port, lset)
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


class _ListenerView:
    """The gateway as a connection on a listener other than the first sees it: the gateway
    itself, except that the broker addresses it names (Metadata, FindCoordinator,
    DescribeCluster... rewritten on the way back, and FindCoordinator(GROUP) answered here)
    are its own listener's."""

    __slots__ = ("_gateway", "_set")

    def __init__(self, gateway: Gateway, lset: ListenerSet) -> None:
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
