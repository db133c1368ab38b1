"""Gateway listeners: the bootstrap one, and one per upstream broker.

Clients bootstrap on ``--listen host:P``. Each upstream broker gets its own listener so
that partition leadership keeps working through the gateway: ports P+1, P+2, ... in
ascending node-id order at start; a broker that appears later gets the next free port
after the highest in use. The mapping never changes while the gateway runs.
"""
from __future__ import annotations

import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BOOTSTRAP = "bootstrap"


def broker_listener_name(node_id: int) -> str:
    return f"broker-{node_id}"


@dataclass(frozen=True, slots=True)
class ListenerInfo:
    name: str
    host: str                                  # the address clients are told (advertised)
    port: int
    node_id: int | None                        # None: the bootstrap listener
    upstream: tuple[tuple[str, int], ...]      # where its requests are forwarded

    def describe(self) -> str:
        target = ", ".join(f"{h}:{p}" for h, p in self.upstream)
        who = "bootstrap" if self.node_id is None else f"node {self.node_id}"
        return f"{self.host}:{self.port} ({who}) -> {target}"


def initial_broker_ports(bootstrap_port: int, node_ids: Iterable[int]) -> dict[int, int]:
    """P+1, P+2, ... in ascending node-id order (0 stays 0: let the OS choose)."""
    return {node: (bootstrap_port + i + 1 if bootstrap_port else 0)
            for i, node in enumerate(sorted(node_ids))}


def parse_address(text: str | tuple[str, int]) -> tuple[str, int]:
    """'host:port' or '[v6]:port' (or a (host, port) tuple) -> (host, port)."""
    if isinstance(text, tuple):
        return text[0], int(text[1])
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {text!r} is not host:port")
    return host.strip("[]") or "0.0.0.0", int(port)


def parse_addresses(value: str | Sequence[str | tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(parse_address(item.strip() if isinstance(item, str) else item) for item in items)


def bind_listening_socket(host: str, port: int, backlog: int = 1024) -> socket.socket:
    """A bound, listening TCP socket, created synchronously so that a port handed to a
    client is accepting connections before the client can try it."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family = infos[0][0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(infos[0][4])
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def advertised_host_for(listen_host: str) -> str:
    """What to tell clients when no advertised host is configured."""
    if listen_host in ("", "0.0.0.0", "::"):
        return socket.gethostname()
    return listen_host
