"""Helpers for the gateway tests: a real Gateway on its own event loop thread, raw protocol I/O.

The gateway runs on a loop in a background thread so that blocking clients
(confluent-kafka, kafka-python, raw sockets) can be used from plain test functions.
Ports come from 29100-29149 (this suite's share of the loopback range); the benchmark
uses 29150-29199.
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from coordinator.gateway import Gateway
from coordinator.protocol import apis
from coordinator.protocol.apis import response_class
from support import ports

T = TypeVar("T")
PORTS = ports.pool()      # this worker's own range (KCOORD_TEST_PORTS, narrowed per xdist worker)
STATE_TOPIC = "__kcoord_gateway_test_state"
STATE_PARTITIONS = 3


def free_ports(count: int = 1) -> int:
    """The first of ``count`` consecutive free ports in this suite's range."""
    return ports.free_block(PORTS, count)


def java_hash(text: str) -> int:
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


class PartitionOnlyService:
    """A GroupService that serves no API: only partition_for, as Kafka computes it."""

    api_versions: dict[int, tuple[int, int]] = {}

    def __init__(self, partitions: int = STATE_PARTITIONS) -> None:
        self.partitions = partitions

    def partition_for(self, group_id: str) -> int:
        h = java_hash(group_id)
        return 0 if h == -(1 << 31) else abs(h) % self.partitions

    async def handle(self, api_key: int, api_version: int, request: Any, client: Any) -> Any:
        raise AssertionError(f"api {api_key} was not advertised and must not reach the service")


class HeartbeatService(PartitionOnlyService):
    """Serves Heartbeat only: REBALANCE_IN_PROGRESS for everyone; group "explode" raises."""

    api_versions = {apis.HEARTBEAT: (0, 4)}

    async def handle(self, api_key: int, api_version: int, req: Any, client: Any) -> Any:
        if req.group_id == "explode":
            raise RuntimeError("service failure injected by the test")
        if req.group_id.startswith("slow"):
            await asyncio.sleep(0.05)   # a handler that answers after later requests are ready
        fields: dict[str, Any] = {"error_code": ErrorCode.rebalance_in_progress}
        if api_version >= 1:
            fields["throttle_time"] = timedelta(0)
        return response_class(api_key, api_version)(**fields)


class LoopThread:
    """An asyncio loop in a daemon thread; ``run(coro)`` waits for its result."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gateway-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        async def wrapper() -> T:
            return fn()
        return self.run(wrapper(), timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class RunningGateway:
    def __init__(self, loop: LoopThread, gateway: Gateway) -> None:
        self.loop = loop
        self.gateway = gateway
        self.port = gateway.listen_port
        self.bootstrap = f"127.0.0.1:{self.port}"

    def broker_ports(self) -> set[int]:
        return {port for _, port in self.loop.call(self.gateway.node_addresses).values()}

    def close(self) -> None:
        self.loop.run(self.gateway.close())


def start_gateway(loop: LoopThread, upstream: str, service: Any = None, *, state_topic: str = STATE_TOPIC,
                  **kwargs: Any) -> RunningGateway:
    port = free_ports(4)   # bootstrap, one broker, room for a late one

    async def make() -> Gateway:
        gateway = Gateway(service or PartitionOnlyService(), upstream, f"127.0.0.1:{port}", state_topic, **kwargs)
        await gateway.start()
        return gateway

    return RunningGateway(loop, loop.run(make()))


# --- raw protocol helpers ----------------------------------------------------------------


