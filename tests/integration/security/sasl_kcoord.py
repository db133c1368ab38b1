"""A real kcoord (GroupCoordinatorService, state topic, Gateway) in this process, on its own
event-loop thread, listening SASL_PLAINTEXT, for the client SASL tests (test_sasl_*.py).

kcoord's own connections (state topic, metadata) use ``own_bootstrap``; the clients' forward
links go to ``forward_bootstrap``. In front of a SASL-only Kafka listener kcoord's own links use
the broker's PLAINTEXT INTERNAL listener (kcoord's own upstream SASL is another part of
issue 13), and ``port_map`` maps the INTERNAL ports that listener's Metadata names to the
CLIENT ports the forward links must reach, so every client byte goes through the broker's
SASL listener.

Also: a raw SCRAM client (RFC 5802) for the exact-answer checks.
"""
from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import hmac
import os
import socket
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from coordinator.config import CoordinatorConfig
from coordinator.gateway import Gateway
from coordinator.gateway.cluster import ClusterSnapshot, ClusterView
from coordinator.gateway.listeners import parse_addresses
from coordinator.gateway.sasl import SaslSettings, enable_sasl
from coordinator.protocol import apis
from coordinator.runtime.state_topic import TOPIC_CONFIGS, StateTopic
from coordinator.service import GroupCoordinatorService
from support import ports
from support.raw_client import decode_response, encode_request, read_frame, request

T = TypeVar("T")
PARTITIONS = 3


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="sasl-kcoord-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 90.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Any, timeout: float = 10.0) -> Any:
        async def wrapper() -> Any:
            return fn()
        return self.run(wrapper(), timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class MappedClusterView(ClusterView):
    """Brokers seen on one listener, addressed on another (INTERNAL port -> CLIENT port)."""

    def __init__(self, *args: Any, port_map: Mapping[int, int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.port_map = dict(port_map)

    def _apply(self, snapshot: ClusterSnapshot) -> None:
        brokers = {node: dataclasses.replace(b, port=self.port_map.get(b.port, b.port))
                   for node, b in snapshot.brokers.items()}
        super()._apply(dataclasses.replace(snapshot, brokers=brokers))


class InProcessKcoord:
    def __init__(self, *, own_bootstrap: str, forward_bootstrap: str, state_topic: str,
                 settings: Mapping[str, str], port_map: Mapping[int, int] | None = None) -> None:
        self.own_bootstrap = own_bootstrap
        self.forward_bootstrap = forward_bootstrap
        self.state_topic = state_topic
        self.settings = dict(settings)
        self.port_map = dict(port_map or {})
        self.loop = LoopThread()
        self.port = ports.free_block(ports.pool(), 4)
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.principals: list[str] = []     # ClientInfo.principal of every group request served
        self.gateway: Gateway | None = None

    def start(self) -> InProcessKcoord:
        self.loop.run(self._start())
        return self

    async def _start(self) -> None:
        self.topic = StateTopic(self.own_bootstrap, self.state_topic, PARTITIONS, replication_factor=1)
        await self.topic.start()
        config = CoordinatorConfig(state_topic=self.state_topic, state_topic_partitions=PARTITIONS,
                                   consumer_heartbeat_interval_ms=500, consumer_session_timeout_ms=10000)
        self.service = service = GroupCoordinatorService(config, self.topic)
        handle = service.handle

        async def recording(api_key: int, api_version: int, req: Any, client: Any) -> Any:
            self.principals.append(client.principal)
            return await handle(api_key, api_version, req, client)
        service.handle = recording   # type: ignore[method-assign]
        self.cluster = MappedClusterView(parse_addresses(self.own_bootstrap), self.state_topic,
                                         port_map=self.port_map)
        self.gateway = gateway = Gateway(service, self.forward_bootstrap, f"SASL_PLAINTEXT://127.0.0.1:{self.port}",
                                         self.state_topic, config=config, cluster=self.cluster)
        await gateway.start()
        enable_sasl(gateway, SaslSettings.from_settings(self.settings, default_on=True))
        service.on_metadata_update(self.cluster.image)
        self.cluster.subscribe(service.on_metadata_update)
        self.cluster.manage_state_topic(service, self.topic, PARTITIONS, TOPIC_CONFIGS)
        await service.start(missing_topic_wait_s=30)

    def stop(self) -> None:
        async def stop() -> None:
            if self.gateway is not None:
                await self.gateway.close()
            await self.cluster.close()
            self.service.close()
            await self.topic.stop()
        try:
            self.loop.run(stop(), 30)
        finally:
            self.loop.stop()
            ports.release(self.port)


# --- a raw client ------------------------------------------------------------------------------

class RawConnection:
    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.cid = 0

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        """The answer, or None when the peer closed the connection instead."""
        self.cid += 1
        try:
            self.sock.sendall(encode_request(api_key, version, self.cid, request(api_key, version, **fields)))
            frame = read_frame(self.sock)
        except (ConnectionResetError, BrokenPipeError):
            return None
        if frame is None:
            return None
        cid, body = decode_response(api_key, version, frame)
        assert cid == self.cid
        return body

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, TimeoutError):
            return True

    def close(self) -> None:
        self.sock.close()


def scram_login(conn: RawConnection, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> list[Any]:
    """SaslHandshake v1 + SaslAuthenticate v2 rounds; returns the answers (stops at the first error)."""
    name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    answers = [conn.call(apis.SASL_HANDSHAKE, 1, mechanism=mechanism)]
    if answers[-1] is None or answers[-1].error_code != 0:
        return answers
    nonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={user},r={nonce}"
    first = conn.call(apis.SASL_AUTHENTICATE, 2, auth_bytes=f"n,,{bare}".encode())
    answers.append(first)
    if first is None or first.error_code != 0:
        return answers
    server_first = first.auth_bytes.decode()
    attrs = dict(item.split("=", 1) for item in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(name, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", name).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    sig = hmac.new(hashlib.new(name, client_key).digest(), f"{bare},{server_first},{without_proof}".encode(),
                   name).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig))).decode()
    answers.append(conn.call(apis.SASL_AUTHENTICATE, 2, auth_bytes=f"{without_proof},p={proof}".encode()))
    return answers


def plain_login(conn: RawConnection, user: str, password: str) -> list[Any]:
    answers = [conn.call(apis.SASL_HANDSHAKE, 1, mechanism="PLAIN")]
    if answers[-1] is not None and answers[-1].error_code == 0:
        answers.append(conn.call(apis.SASL_AUTHENTICATE, 2, auth_bytes=f"\x00{user}\x00{password}".encode()))
    return answers
