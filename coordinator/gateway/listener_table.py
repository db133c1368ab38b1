"""The gateway's listeners and the ports they hold (Gateway's part): for each Kafka
listener its bootstrap port, then one port per upstream broker, bound before any client is
told about them.

Rules:
- a listener's port names are "bootstrap" and "broker-<node id>", prefixed "<NAME>/" when
  there are several Kafka listeners (listeners.py);
- a port is bound at once (`listen`), so it accepts before its address is answered to a
  client; serving it is the caller's (`serve(name, sock)`, run as a task);
- a broker that appears while running gets the next free port on every listener (up to
  `_PORT_ATTEMPTS` tried); one that moves upstream keeps its gateway port, now fronting the
  new address;
- `node_addresses` and `listeners` answer for the first listener unless told another.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from ..security.listener_metrics import CONNECTIONS, TLS_HANDSHAKE_FAILURES
from ..security.tls import ListenerSecurity
from .listeners import BOOTSTRAP, ListenerInfo, ListenerSpec, bind_listening_socket, broker_listener_name

log = logging.getLogger("kcoord.gateway")

_PORT_ATTEMPTS = 100   # ports tried for a broker that appears while running


class ListenerSet:
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


class ListenerTable:
    def __init__(self, sets: list[ListenerSet],
                 serve: Callable[[str, socket.socket], Coroutine[Any, Any, None]]) -> None:
        self.sets = sets
        self.by_name = {lset.name: lset for lset in sets}
        self.infos: dict[str, ListenerInfo] = {}     # port name -> what it fronts
        self.serving: set[asyncio.Task[None]] = set()   # ports bound, their server starting
        self._serve = serve

    @property
    def listeners(self) -> tuple[ListenerInfo, ...]:
        """For each Kafka listener in order: its bootstrap port, then one per upstream
        broker by node id."""
        order = {lset.name: lset.index for lset in self.sets}
        return tuple(sorted(self.infos.values(),
                            key=lambda i: (order.get(i.listener, 0), i.node_id is not None, i.node_id or 0)))

    def set_of(self, info: ListenerInfo) -> ListenerSet:
        return self.by_name.get(info.listener) or self.sets[0]

    def node_addresses(self, listener: str | None = None) -> dict[int, tuple[str, int]]:
        """node id -> the gateway (host, port) fronting it on ``listener`` (default: the first)."""
        name = listener or self.sets[0].name
        return {i.node_id: (i.host, i.port) for i in self.infos.values()
                if i.node_id is not None and (i.listener == name or i.listener not in self.by_name)}

    def listen(self, info: ListenerInfo) -> ListenerInfo:
        """Binds at once (so the port accepts before any client is told about it) and
        starts serving in the background."""
        lset = self.set_of(info)
        bind_host = lset.spec.host
        try:
            sock = bind_listening_socket(bind_host, info.port)
        except OSError as e:
            raise OSError(e.errno, f"cannot listen on {bind_host}:{info.port} for {info.name}: "
                                   f"{e.strerror or e}") from e
        if info.port == 0:
            info = dataclasses.replace(info, port=sock.getsockname()[1])
        self.infos[info.name] = info
        if info.node_id is not None:
            lset.node_listener[info.node_id] = info.name
        task = asyncio.get_running_loop().create_task(self._serve(info.name, sock))
        self.serving.add(task)
        task.add_done_callback(self.serving.discard)
        return info

    def broker_listener(self, node_id: int, host: str, port: int, lset: ListenerSet | None = None) -> ListenerInfo:
        """The listener fronting ``node_id`` on ``lset`` (default: the first listener); a
        new broker gets the next free port."""
        lset = lset or self.sets[0]
        name = lset.node_listener.get(node_id)
        if name is not None:
            info = self.infos[name]
            if info.upstream != ((host, port),):
                log.info("node %d now advertises %s:%d upstream", node_id, host, port)
                info = self.infos[name] = dataclasses.replace(info, upstream=((host, port),))
            return info
        next_port = max((i.port for i in self.infos.values()), default=lset.spec.port) + 1
        for attempt in range(_PORT_ATTEMPTS):
            port_to_try = next_port + attempt if lset.spec.port else 0
            try:
                info = self.listen(lset.info(node_id, port_to_try, ((host, port),)))
            except OSError as e:
                log.debug("port %d for node %d: %s", port_to_try, node_id, e)
                continue
            log.info("listener %s: %s (broker appeared)", info.name, info.describe())
            return info
        raise OSError(f"no free port for node {node_id} in {next_port}-{next_port + _PORT_ATTEMPTS - 1}")

    def on_brokers(self, brokers: Mapping[int, Any]) -> None:
        """The upstream's brokers changed: every listener fronts each of them."""
        for lset in self.sets:
            for broker in brokers.values():
                try:
                    self.broker_listener(broker.node_id, broker.host, broker.port, lset)
                except OSError as e:
                    log.error("cannot open a listener for node %d on %s: %s", broker.node_id, lset.name, e)
