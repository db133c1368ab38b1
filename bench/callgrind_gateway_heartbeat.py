"""Instructions per steady ConsumerGroupHeartbeat v1 through the gateway's whole in-process
path (ClientConnection.data_received + flush + the service), counted by callgrind.

    .venv/bin/python bench/callgrind_gateway_heartbeat.py [--requests 20000]

re-runs itself under `valgrind --tool=callgrind` (apt package valgrind) with collection on
only inside the measured loop (``itertools.starmap``), so set-up is never counted, and
prints instructions per request. Compare two checkouts with the same Python build and the
same command: the absolute count depends on both. Without valgrind, ``--plain`` runs the
loop once and checks that every answer is a steady heartbeat.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import itertools
import os
import re
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

TOPIC = "cg"


class _Transport(asyncio.Transport):
    """Counts writes and keeps the last one; never pauses."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.last = b""

    def get_extra_info(self, name, default=None):  # type: ignore[no-untyped-def]
        return ("10.1.1.1", 5555) if name == "peername" else default

    def write(self, data) -> None:  # type: ignore[no-untyped-def]
        self.writes += 1
        self.last = bytes(data)

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def is_closing(self) -> bool: return False
    def close(self) -> None: ...
    def abort(self) -> None: ...
    def get_write_buffer_size(self) -> int: return 0


async def _measure(n: int) -> None:
    from loadgen.consumer_member import ConsumerMember
    from loadgen.inproc import AckingStateTopic
    from loadgen.wire import CONSUMER_GROUP_HEARTBEAT

    from coordinator.config import CoordinatorConfig
    from coordinator.gateway import Gateway
    from coordinator.gateway.connection import ClientConnection
    from coordinator.gateway.listeners import BOOTSTRAP, ListenerInfo
    from coordinator.gateway.routes import build_routes
    from coordinator.group.image import MetadataImage, TopicImage
    from coordinator.protocol import apis
    from coordinator.protocol.api_versions import Features, api_versions_body
    from coordinator.protocol.service import ClientInfo
    from coordinator.service import GroupCoordinatorService

    config = CoordinatorConfig(state_topic_partitions=4)
    service = GroupCoordinatorService(config, AckingStateTopic())
    image = MetadataImage.of([TopicImage(topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, TOPIC), name=TOPIC,
                                         num_partitions=100)])
    for runtime in service.runtimes:
        runtime.begin_load()
        runtime.finish_load(0)
    service.on_metadata_update(image)
    # The client id and host of the steady frames (loadgen.wire): a change would be a write.
    client = ClientInfo("kcoord-loadgen", "10.1.1.1", 5555, "bootstrap")
    # Deterministic member ids: the same set-up in every run.
    members = [ConsumerMember(f"g-{i % 10:04d}", (TOPIC,), member_id=f"member-{i:015d}") for i in range(100)]
    for _ in range(20):
        for m in members:
            m.on_response(await service.handle(CONSUMER_GROUP_HEARTBEAT, 1, m.next_request(), client))
        for runtime in service.runtimes:
            for key in list(getattr(runtime, "_timers", {})):
                if key and key[0] == "assignment":
                    runtime.submit(lambda shard, now, key=key: shard.on_timer(key, None, now + 10_000))
        if all(m.is_steady() for m in members):
            break
    if not all(m.is_steady() for m in members):
        raise SystemExit("the members did not reach a steady state in 20 rounds")
    frames = [m.steady_template().with_correlation(i) for i, m in enumerate(members)]
    gateway = Gateway(service, "127.0.0.1:1", "127.0.0.1:0", "state", config=CoordinatorConfig())
    gateway.api_versions = {apis.API_VERSIONS: (0, 4), CONSUMER_GROUP_HEARTBEAT: (0, 1)}
    gateway.routes = build_routes(gateway.api_versions, {CONSUMER_GROUP_HEARTBEAT})
    gateway.api_versions_bodies = {v: api_versions_body(v, gateway.api_versions, Features()) for v in range(5)}
    connection = ClientConnection(gateway, ListenerInfo(BOOTSTRAP, "127.0.0.1", 0, None, (("127.0.0.1", 1),)))
    transport = _Transport()
    connection.connection_made(transport)
    args = [(frames[i % len(frames)],) for i in range(n)]
    gc.collect()
    # Only this loop runs inside itertools.starmap's C function, where callgrind collects.
    collections.deque(itertools.starmap(connection.data_received, args), maxlen=0)
    if transport.writes != n or transport.last[13:15] != b"\x00\x00":
        raise SystemExit(f"expected {n} steady answers, got {transport.writes} (last {transport.last[:20]!r})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--plain", action="store_true", help="run the loop without valgrind")
    args = parser.parse_args()
    if args.plain:
        asyncio.run(_measure(args.requests))
        print(f"{args.requests} steady heartbeats answered")
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=starmap_next",
                        f"--callgrind-out-file={out}", sys.executable, __file__, "--plain",
                        "--requests", str(args.requests)],
                       check=True, env={**os.environ, "PYTHONHASHSEED": "0"}, capture_output=True)
        summary = re.search(r"^summary:\s+(\d+)", Path(out).read_text(), re.MULTILINE)
        if summary is None:
            raise SystemExit("callgrind wrote no summary")
        total = int(summary.group(1))
    print(f"{total / args.requests:,.0f} instructions per steady ConsumerGroupHeartbeat v1 "
          f"({total:,} over {args.requests:,}; {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
