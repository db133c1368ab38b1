"""Gateway listeners: the bootstrap one, and one per upstream broker, for each listener.

Clients bootstrap on ``--listen host:P``. Each upstream broker gets its own listener so
that partition leadership keeps working through the gateway: ports P+1, P+2, ... in
ascending node-id order at start; a broker that appears later gets the next free port
after the highest in use. The mapping never changes while the gateway runs.

Listeners in Kafka's syntax: ``--listen`` takes ``NAME://host:port`` items,
repeated or comma-separated. NAME is a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT,
SASL_SSL), or a name that ``listener.security.protocol.map`` (``INTERNAL:PLAINTEXT,
EXTERNAL:SASL_SSL``) maps to one; a bare ``host:port`` is a PLAINTEXT listener named
PLAINTEXT. Each listener gets its own bootstrap port P and broker ports P+1.., which
inherit its protocol and its advertised host: Metadata and FindCoordinator answers given on
a listener name that listener's ports. With one listener the per-port names stay
``bootstrap`` and ``broker-N``; with several they are ``<LISTENER>/bootstrap`` and
``<LISTENER>/broker-N``.
"""
from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..security.tls import PROTOCOLS, ListenerSecurity

BOOTSTRAP = "bootstrap"
PLAINTEXT = "PLAINTEXT"


def broker_listener_name(node_id: int) -> str:
    return f"broker-{node_id}"


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    """One ``--listen`` item: a Kafka listener."""

    name: str            # Kafka's listener name: PLAINTEXT, SSL, INTERNAL, ...
    protocol: str        # its security protocol
    host: str            # where it binds
    port: int            # its bootstrap port (0: the OS chooses)


def parse_protocol_map(text: str | None) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...`` (names upper-cased, as
    Kafka's listener names are case-insensitive)."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip() or protocol not in PROTOCOLS:
            raise ValueError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL "
                             f"(PROTOCOL one of {', '.join(PROTOCOLS)})")
        out[name.strip().upper()] = protocol
    return out


def parse_listener_specs(value: str | tuple[str, int] | Sequence[str | tuple[str, int]],
                         protocol_map: Mapping[str, str] | None = None) -> tuple[ListenerSpec, ...]:
    """``--listen`` values (each may hold several, comma-separated) -> listeners."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], int):
        items: list[str | tuple[str, int]] = [value]   # one (host, port)
    elif isinstance(value, str):
        items = [value]
    else:
        items = list(value)
    texts: list[str | tuple[str, int]] = []
    for item in items:
        if isinstance(item, tuple):
            texts.append(item)
        else:
            texts.extend(part.strip() for part in item.split(",") if part.strip())
    names = {k.upper(): v for k, v in (protocol_map or {}).items()}
    specs: list[ListenerSpec] = []
    for text in texts:
        if isinstance(text, tuple):
            host, port = parse_address(text)
            specs.append(ListenerSpec(PLAINTEXT, PLAINTEXT, host, port))
            continue
        name, sep, address = text.partition("://")
        if not sep:
            name, address = PLAINTEXT, text
        name = name.strip().upper()
        if not name:
            raise ValueError(f"listener {text!r}: no name before ://")
        protocol = names.get(name) or (name if name in PROTOCOLS else None)
        if protocol is None:
            raise ValueError(f"listener {text!r}: {name} is neither a security protocol "
                             f"({', '.join(PROTOCOLS)}) nor named in listener.security.protocol.map")
        host, port = parse_address(address)
        specs.append(ListenerSpec(name, protocol, host, port))
    if not specs:
        raise ValueError("no listener given")
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ValueError(f"listener name {spec.name} is given twice (each listener needs its own name: "
                             "use listener.security.protocol.map for two of one protocol)")
        seen.add(spec.name)
    return tuple(specs)   # map entries for listeners not given are fine (Kafka's too)


def parse_advertised_hosts(value: str | Mapping[str, str] | None) -> tuple[str | None, dict[str, str]]:
    """``--advertised-host``: one host for every listener, and/or ``NAME=host`` items for
    some (``INTERNAL=kcoord.svc,EXTERNAL=kcoord.example.com``)."""
    if value is None:
        return None, {}
    if isinstance(value, Mapping):
        return None, {k.upper(): v for k, v in value.items()}
    default: str | None = None
    per: dict[str, str] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, host = item.partition("=")
        if sep:
            per[name.strip().upper()] = host.strip()
        else:
            default = item
    return default, per


@dataclass(frozen=True, slots=True)
class ListenerInfo:
    name: str
    host: str                                  # the address clients are told (advertised)
    port: int
    node_id: int | None                        # None: the bootstrap listener
    upstream: tuple[tuple[str, int], ...]      # where its requests are forwarded
    listener: str = PLAINTEXT                  # the Kafka listener it belongs to
    security_protocol: str = PLAINTEXT         # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    security: ListenerSecurity | None = None   # TLS and the mTLS principal (None: PLAINTEXT)

    def describe(self) -> str:
        target = ", ".join(f"{h}:{p}" for h, p in self.upstream)
        who = "bootstrap" if self.node_id is None else f"node {self.node_id}"
        if self.security_protocol == PLAINTEXT and self.listener == PLAINTEXT:
            return f"{self.host}:{self.port} ({who}) -> {target}"
        name = "" if self.listener == self.security_protocol else f"{self.listener} "
        return f"{name}{self.security_protocol}://{self.host}:{self.port} ({who}) -> {target}"

    def principal_of(self, transport: Any) -> str | None:
        """The principal of the client on ``transport`` from its certificate: ``User:`` and
        its mapped subject on an SSL listener with ssl.client.auth; None otherwise (no
        certificate, another protocol: SASL decides on SASL_SSL)."""
        if self.security is None:
            return None
        return self.security.principal_of(transport)


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
