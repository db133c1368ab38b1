"""Raw-socket load with per-request latency: ``connections`` sockets, ``depth`` requests in
flight on each (depth 1 = a closed loop, how consumers heartbeat and commit; depth > 1 =
pipelined). The load-generator processes run on the cores given (``load_cpus``), never on
the server's.

Why not bench/loadgen/blast.py as is: its workers count responses but time none, and the
side-by-side table reports p50/p99. The frame handling is blast's (its ``_count`` walks the
size prefixes and reads each response's error code at a fixed offset; its ``_Window``
bounds the measured window); the sockets are opened first, a few handshakes at a time
(bench/vs_kafka/wire.py ``_connect_all``: Kafka's listen backlog is 50), and the window
starts only when every worker is connected.

Several targets (``run_targets``): a kcoord cluster serves each group at the instance that
owns its shard, so each group's requests go to its coordinator's port; every target gets
its own worker processes and its share of the connections, all in one measured window.

Latency: the send time of every request is kept per socket in a FIFO (Kafka answers a
connection's requests in order, so the n-th response answers the n-th request); a response
completed inside the window records ``now - sent``. The server side's CPU (every server
process: user + system time from /proc) is sampled over the same window by the parent.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import select
import statistics
import time
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from loadgen import procs
from loadgen.blast import Load, _count, _Window
from vs_kafka.wire import _connect_all


@dataclass(frozen=True)
class LoadResult:
    rate: float                  # responses/s inside the window
    responses: int
    errors: dict[int, int]       # error code -> count
    p50_us: float | None
    p99_us: float | None
    server_cpu_s: float          # all server processes, inside the window
    generator_cpu_s: float
    window_s: float
    server_cpu_by_pid: dict[int, float] | None = None   # each server process, inside the window
    responses_by_port: dict[int, int] | None = None     # each target's responses, inside the window
    waiting_by_pid: dict[int, float] | None = None      # each server process's run-queue wait, in the window

    @property
    def cpu_us_per_op(self) -> float | None:
        return self.server_cpu_s / self.responses * 1e6 if self.responses else None

    def figures(self) -> dict[str, object]:
        return {"rate": self.rate, "p50_us": self.p50_us, "p99_us": self.p99_us,
                "cpu_us_per_op": self.cpu_us_per_op, "server_cores": self.server_cpu_s / self.window_s,
                "generator_cores": self.generator_cpu_s / self.window_s, "responses": self.responses,
                "errors": {str(k): v for k, v in self.errors.items()},
                "server_cpu_by_pid": {str(k): v for k, v in (self.server_cpu_by_pid or {}).items()},
                "responses_by_port": {str(k): v for k, v in (self.responses_by_port or {}).items()},
                "waiting_by_pid": {str(k): v for k, v in (self.waiting_by_pid or {}).items()}}


def _worker(port: int, error_offset: int, frames: Sequence[bytes], connections: int, depth: int,
            warmup: float, seconds: float, cpus: set[int], ready: mp.Queue, go: mp.Queue, out: mp.Queue) -> None:
    os.sched_setaffinity(0, cpus)
    socks = _connect_all("127.0.0.1", port, connections)
    ready.put(len(socks))
    start_at = go.get()
    load = Load("127.0.0.1", port, error_offset, start_at, warmup, seconds)
    win = _Window(load)
    latencies = array("d")
    ep = select.epoll()
    state: dict[int, tuple] = {}
    for j, s in enumerate(socks):     # blocking sockets: a recv follows an EPOLLIN, a send is small
        mine = list(frames[j::connections]) or [frames[j % len(frames)]]
        state[s.fileno()] = (s, bytearray(), mine, [0], deque())
        ep.register(s.fileno(), select.EPOLLIN)
    time.sleep(max(0.0, start_at - time.monotonic()))

    def send(entry, n: int) -> None:
        s, _, mine, nxt, sent = entry
        now = time.monotonic()
        i = nxt[0]
        chunk = []
        for _ in range(n):
            chunk.append(mine[i])
            sent.append(now)
            i = (i + 1) % len(mine)
        nxt[0] = i
        s.sendall(b"".join(chunk))

    for entry in state.values():
        send(entry, depth)
    in_flight = depth * len(socks)
    sending = True
    while in_flight:
        events = ep.poll(1.0)
        now = time.monotonic()
        sending = win.tick(now) and sending
        for fd, _ in events:
            entry = state[fd]
            s, buf, _, _, sent = entry
            chunk = s.recv(1 << 20)
            if not chunk:
                raise RuntimeError("server closed the connection")
            buf += chunk
            n = _count(buf, error_offset, win)
            if not n:
                continue
            for _ in range(n):
                t = sent.popleft()
                if win.open:
                    latencies.append(now - t)
            if sending:
                send(entry, n)
            else:
                in_flight -= n
    for s in socks:
        s.close()
    out.put((port, win.result(), latencies))


def run(port: int, frames: Sequence[bytes], error_offset: int, *, connections: int, depth: int,
        server_pids: Sequence[int], load_cpus: set[int], workers: int = 1, seconds: float = 4.0,
        warmup: float = 1.0) -> LoadResult:
    """``workers`` processes share ``connections`` sockets and ``frames`` evenly."""
    return run_targets([(port, frames)], error_offset, connections=connections, depth=depth,
                       server_pids=server_pids, load_cpus=load_cpus, workers=workers, seconds=seconds,
                       warmup=warmup)


def run_targets(targets: Sequence[tuple[int, Sequence[bytes]]], error_offset: int, *, connections: int,
                depth: int, server_pids: Sequence[int], load_cpus: set[int], workers: int = 1,
                seconds: float = 4.0, warmup: float = 1.0) -> LoadResult:
    """Every (port, frames) target gets ``connections`` / len(targets) sockets over
    max(1, ``workers`` / len(targets)) processes; one window for all."""
    ctx = mp.get_context("fork")
    ready, go, out = ctx.Queue(), ctx.Queue(), ctx.Queue()
    per_target = max(1, workers // len(targets))
    per = max(1, connections // (len(targets) * per_target))
    ps = [ctx.Process(target=_worker, args=(port, error_offset, frames[i::per_target], per, depth, warmup,
                                            seconds, load_cpus, ready, go, out))
          for port, frames in targets for i in range(per_target)]
    window = procs.forked_window(ps, ready, go, out, server_pids, warmup=warmup, seconds=seconds)
    results, by_pid, waiting = window.results, window.cpu_by_pid, window.waiting_by_pid
    errors: dict[int, int] = {}
    by_port: dict[int, int] = {}
    lat = array("d")
    for port, r, ls in results:
        lat.extend(ls)
        by_port[port] = by_port.get(port, 0) + r.responses
        for code, n in r.errors.items():
            errors[code] = errors.get(code, 0) + n
    responses = sum(by_port.values())
    p50 = p99 = None
    if len(lat) >= 100:
        q = statistics.quantiles(lat, n=100, method="inclusive")
        p50, p99 = q[49] * 1e6, q[98] * 1e6
    return LoadResult(rate=responses / seconds, responses=responses, errors=errors, p50_us=p50, p99_us=p99,
                      server_cpu_s=sum(by_pid.values()), generator_cpu_s=sum(r.cpu_seconds for _, r, _ in results),
                      window_s=seconds, server_cpu_by_pid=by_pid, responses_by_port=by_port,
                      waiting_by_pid=waiting)
