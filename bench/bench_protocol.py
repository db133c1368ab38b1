"""Pipelined requests/s through the gateway vs directly to Tansu, in the same run.

    .venv/bin/python bench/bench_protocol.py [--api apiversions|listoffsets|metadata|heartbeat]
        [--seconds 5] [--window 256] [--connections 2] [--runs 3] [--uvloop]

Starts a Tansu broker and a gateway (in its own process, so the load generator does not
share its core), then for each target runs load-generator processes that keep
``window`` requests in flight per connection on raw sockets. Reports requests/s for
Tansu direct, for the gateway, and the ratio. ``apiversions`` is answered by the
gateway itself, ``listoffsets`` (empty) is forwarded byte for byte, ``metadata`` (no
topics) is forwarded and its brokers rewritten. ``heartbeat`` measures a group API served
locally by a stub GroupService that returns a pre-encoded body (the dispatch overhead
of a locally served request, not a real coordinator).
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import socket
import statistics
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support import ports  # noqa: E402

PORT_RANGE = range(29150, 29199)   # this benchmark's share of the helper's loopback ports


def free_port(span: int = 1) -> int:
    return ports.free_block(PORT_RANGE, span)


def request_frame(api: str, correlation_id: int) -> bytes:
    from coordinator.protocol.apis import request_class, request_header_version
    from coordinator.protocol.codec import encode_body
    from coordinator.protocol.framing import RequestHeader
    if api == "apiversions":
        key, version = 18, 3
        body = encode_body(request_class(key, version)(client_software_name="bench", client_software_version="1"))
    elif api == "listoffsets":   # forwarded byte for byte, nothing rewritten
        key, version = 2, 9
        body = encode_body(request_class(key, version)(replica_id=-1, isolation_level=0, topics=()))
    elif api == "metadata":
        key, version = 3, 12
        body = encode_body(request_class(key, version)(topics=(), allow_auto_topic_creation=False,
                                                       include_topic_authorized_operations=False))
    else:
        key, version = 12, 4
        body = encode_body(request_class(key, version)(group_id="bench-group", generation_id=1,
                                                       member_id="m-1", group_instance_id=None))
    head = RequestHeader(key, version, correlation_id, "bench").encode(request_header_version(key, version))
    return struct.pack(">i", len(head) + len(body)) + head + body


def load_worker(port: int, api: str, seconds: float, window: int, out: mp.Queue) -> None:
    frame = request_frame(api, 7)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    batch = frame * window
    sock.sendall(batch)
    buf = bytearray()
    done = 0
    in_flight = window
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise RuntimeError("connection closed by the server")
        buf += chunk
        pos, n = 0, 0
        while len(buf) - pos >= 4:
            (size,) = struct.unpack_from(">i", buf, pos)
            if len(buf) - pos - 4 < size:
                break
            pos += 4 + size
            n += 1
        del buf[:pos]
        done += n
        in_flight -= n
        now = time.perf_counter()
        if now >= deadline:
            if in_flight == 0:
                break
            continue
        if n:
            sock.sendall(frame * n)   # keep the window full
            in_flight += n
    elapsed = time.perf_counter() - start
    sock.close()
    out.put(done / elapsed)


def measure(port: int, api: str, seconds: float, window: int, connections: int) -> float:
    out: mp.Queue = mp.Queue()
    procs = [mp.Process(target=load_worker, args=(port, api, seconds, window, out)) for _ in range(connections)]
    for p in procs:
        p.start()
    rates = [out.get(timeout=seconds + 30) for _ in procs]
    for p in procs:
        p.join()
    return sum(rates)


class _StubService:
    """Answers Heartbeat with a fixed, pre-encoded v4 body (error NONE)."""

    api_versions = {12: (4, 4)}
    _BODY = struct.pack(">ihB", 0, 0, 0)   # throttle_time_ms, error_code, no tagged fields

    def partition_for(self, group_id: str) -> int:
        return 0

    async def handle(self, api_key, api_version, request, client):  # noqa: ANN001
        return self._BODY


def run_gateway(upstream: str, listen: str, ready: mp.Event, stop: mp.Event, use_uvloop: bool) -> None:
    from coordinator.gateway import Gateway
    if use_uvloop:
        import uvloop
        uvloop.install()

    async def main() -> None:
        gateway = Gateway(_StubService(), upstream, listen, "__bench_state")
        await gateway.start()
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.2)
        await gateway.close()

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api", choices=["apiversions", "listoffsets", "metadata", "heartbeat"], default="apiversions")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--uvloop", action="store_true")
    args = parser.parse_args()

    from support.tansu import start_tansu
    tansu_port = free_port()
    broker = start_tansu(tansu_port)
    gateway_port = free_port(span=2)
    ready, stop = mp.Event(), mp.Event()
    gw = mp.Process(target=run_gateway, args=(broker.bootstrap, f"127.0.0.1:{gateway_port}", ready, stop, args.uvloop))
    gw.start()
    try:
        if not ready.wait(30):
            raise RuntimeError("gateway did not start")
        direct_api = "apiversions" if args.api == "heartbeat" else args.api
        direct, through = [], []
        for _ in range(args.runs):
            direct.append(measure(broker.port, direct_api, args.seconds, args.window, args.connections))
            through.append(measure(gateway_port, args.api, args.seconds, args.window, args.connections))
        d, g = statistics.median(direct), statistics.median(through)
        print(f"api={args.api} window={args.window} connections={args.connections} seconds={args.seconds} "
              f"runs={args.runs} loop={'uvloop' if args.uvloop else 'asyncio'} cpus={os.cpu_count()}")
        print(f"tansu direct ({direct_api}): {d:,.0f} req/s  (runs: {', '.join(f'{x:,.0f}' for x in direct)})")
        print(f"through gateway ({args.api}): {g:,.0f} req/s  (runs: {', '.join(f'{x:,.0f}' for x in through)})")
        print(f"gateway / direct: {g / d:.2f}")
    finally:
        stop.set()
        gw.join(10)
        if gw.is_alive():
            gw.kill()
        broker.stop()


if __name__ == "__main__":
    main()
