"""Lean raw-socket load processes for steady-state request rates.

Each worker is a separate process (2 cores: the server gets one, the generator the
other) that sends pre-encoded frames and only walks the size prefixes of what comes
back, reading each response's error code at a fixed offset. Three patterns:

- ``pipelined``: one connection per worker with ``window`` requests in flight; every
  batch of responses read is answered with as many new requests in one send (a
  throughput ceiling; real consumers do not do this);
- ``closed_loop``: ``connections`` sockets per worker, each with exactly one request in
  flight; the next goes when its response has arrived. With one connection per member
  this is how real consumers heartbeat (each waits for its response), so every request
  costs the server a wake-up, a read and a write of its own;
- ``paced``: ``connections`` sockets per worker, requests sent open-loop at a fixed ``rate``
  per worker, round-robin over the sockets, whatever the responses do. It holds the server
  below saturation at a chosen offered load, as a fleet of consumers each heartbeating at
  its interval does; the rate reached tells whether the server kept up.

Frames are sent in a fixed cycle (member 0, 1, ...), so every member heartbeats at the
same rate. Responses are counted only inside the measured window
``[start_at + warmup, start_at + warmup + seconds]`` (time.monotonic, which is
system-wide on Linux, so the parent can sample the server's CPU over the same window).
"""
from __future__ import annotations

import multiprocessing as mp
import resource
import select
import socket
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

_SIZE = struct.Struct(">i")
_ERROR = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class Load:
    host: str
    port: int
    error_offset: int          # offset of the int16 error code inside a framed response
    start_at: float            # time.monotonic() at which sending starts
    warmup: float
    seconds: float


@dataclass(frozen=True, slots=True)
class WorkerResult:
    responses: int             # inside the window
    errors: dict[int, int]     # error code -> count, inside the window
    cpu_seconds: float         # the worker's own user+sys CPU inside the window
    window: float


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _cycle(frames: Sequence[bytes]) -> tuple[bytes, list[int]]:
    """The frames twice in a row, and the offset of every frame in it: any run of up to
    len(frames) consecutive frames is then one slice."""
    doubled = list(frames) * 2
    offsets = [0]
    for f in doubled:
        offsets.append(offsets[-1] + len(f))
    return b"".join(doubled), offsets


class _Window:
    __slots__ = ("begin", "end", "responses", "errors", "cpu_begin", "cpu_end", "open")

    def __init__(self, load: Load) -> None:
        self.begin = load.start_at + load.warmup
        self.end = self.begin + load.seconds
        self.responses = 0
        self.errors: dict[int, int] = {}
        self.cpu_begin = self.cpu_end = 0.0
        self.open = False

    def tick(self, now: float) -> bool:
        """Called once per read; True while sending should go on."""
        if not self.open and self.begin <= now < self.end:
            self.open, self.cpu_begin = True, _cpu()
        elif self.open and now >= self.end:
            self.open, self.cpu_end = False, _cpu()
        return now < self.end

    def result(self) -> WorkerResult:
        return WorkerResult(self.responses, self.errors, self.cpu_end - self.cpu_begin, self.end - self.begin)


def _count(buf: bytearray, error_offset: int, window: _Window) -> int:
    """Consume complete frames at the front of ``buf``; returns how many."""
    pos, end, n = 0, len(buf), 0
    unpack_size, unpack_error = _SIZE.unpack_from, _ERROR.unpack_from
    counting = window.open
    while end - pos >= 4:
        (size,) = unpack_size(buf, pos)
        if end - pos - 4 < size:
            break
        if counting:
            (code,) = unpack_error(buf, pos + error_offset)
            if code:
                window.errors[code] = window.errors.get(code, 0) + 1
        pos += 4 + size
        n += 1
    if pos:
        del buf[:pos]
    if counting:
        window.responses += n
    return n


def _connect(load: Load) -> socket.socket:
    sock = socket.create_connection((load.host, load.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def pipelined_worker(load: Load, frames: Sequence[bytes], window_size: int, out: mp.Queue) -> None:
    run_pipelined(_connect(load), load, frames, window_size, out)


def run_pipelined(sock: socket.socket, load: Load, frames: Sequence[bytes], window_size: int,
                  out: mp.Queue) -> None:
    """Keep `window_size` requests in flight on `sock` until the load's window ends
    (tls_blast.py runs the same loop over a TLS socket)."""
    cycle, offsets = _cycle(frames)
    m = len(frames)
    window_size = min(window_size, m)
    win = _Window(load)
    time.sleep(max(0.0, load.start_at - time.monotonic()))
    nxt = 0

    def send(n: int) -> None:
        nonlocal nxt
        sock.sendall(cycle[offsets[nxt]:offsets[nxt + n]])
        nxt = (nxt + n) % m

    send(window_size)
    in_flight = window_size
    buf = bytearray()
    sending = True
    while in_flight:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise RuntimeError("server closed the connection")
        buf += chunk
        sending = win.tick(time.monotonic()) and sending
        n = _count(buf, load.error_offset, win)
        in_flight -= n
        if sending and n:
            send(n)
            in_flight += n
    sock.close()
    out.put(win.result())


def _socket_share(frames: Sequence[bytes], j: int, connections: int) -> list[bytes]:
    """The frames socket ``j`` of ``connections`` sends: j, j + connections, ... (at least one)."""
    return list(frames[j::connections]) or [frames[j % len(frames)]]


def closed_loop_worker(load: Load, frames: Sequence[bytes], connections: int, out: mp.Queue) -> None:
    """``connections`` sockets, one request in flight on each; socket j sends frames
    j, j + connections, j + 2 * connections, ... of ``frames``."""
    socks = [_connect(load) for _ in range(connections)]
    ep = select.epoll()
    state: dict[int, tuple[socket.socket, bytearray, list[bytes], list[int]]] = {}
    for j, s in enumerate(socks):
        s.setblocking(False)
        mine = _socket_share(frames, j, connections)
        state[s.fileno()] = (s, bytearray(), mine, [0])
        ep.register(s.fileno(), select.EPOLLIN)
    win = _Window(load)
    time.sleep(max(0.0, load.start_at - time.monotonic()))
    for s, _, mine, nxt in state.values():
        s.send(mine[0])
        nxt[0] = 1 % len(mine)
    in_flight = len(socks)
    sending = True
    error_offset = load.error_offset
    while in_flight:
        events = ep.poll(1.0)
        sending = win.tick(time.monotonic()) and sending
        for fd, _ in events:
            s, buf, mine, nxt = state[fd]
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("server closed the connection")
            buf += chunk
            if _count(buf, error_offset, win):
                if sending:
                    i = nxt[0]
                    s.send(mine[i])
                    nxt[0] = (i + 1) % len(mine)
                else:
                    in_flight -= 1
    for s in socks:
        s.close()
    out.put(win.result())


def paced_worker(load: Load, frames: Sequence[bytes], connections: int, rate: float, out: mp.Queue) -> None:
    """``connections`` sockets; socket j owns frames j, j + connections, ... of ``frames``.
    Every millisecond or so the frames due by then (``rate`` per second since start_at) go
    out, one per socket in turn; responses are read as they come. Sending stops at the end
    of the window; the worker then drains what is in flight (bounded: 30 s)."""
    socks = [_connect(load) for _ in range(connections)]
    ep = select.epoll()
    state: dict[int, tuple[socket.socket, bytearray]] = {}
    owned: list[tuple[socket.socket, list[bytes], list[int]]] = []
    for j, s in enumerate(socks):
        mine = _socket_share(frames, j, connections)
        owned.append((s, mine, [0]))
        state[s.fileno()] = (s, bytearray())
        ep.register(s.fileno(), select.EPOLLIN)
    win = _Window(load)
    time.sleep(max(0.0, load.start_at - time.monotonic()))
    sent = received = turn = 0
    sending = True
    error_offset = load.error_offset
    drain_until = load.start_at + load.warmup + load.seconds + 30.0
    while sending or received < sent:
        now = time.monotonic()
        sending = win.tick(now) and sending
        if sending:
            due = int((now - load.start_at) * rate) - sent
            for _ in range(due):
                s, mine, nxt = owned[turn]
                s.sendall(mine[nxt[0]])
                nxt[0] = (nxt[0] + 1) % len(mine)
                turn = (turn + 1) % connections
            sent += max(0, due)
            timeout = max(0.0, (sent + 1) / rate + load.start_at - time.monotonic())
        elif now > drain_until:
            raise RuntimeError(f"{sent - received} responses still missing 30 s after the window")
        else:
            timeout = 1.0
        for fd, _ in ep.poll(timeout):
            s, buf = state[fd]
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("server closed the connection")
            buf += chunk
            received += _count(buf, error_offset, win)
    for s in socks:
        s.close()
    out.put(win.result())


@dataclass(frozen=True, slots=True)
class BlastResult:
    rate: float                 # responses/s inside the window, all workers
    responses: int
    errors: dict[int, int]
    generator_cpu: float        # CPU seconds of all workers inside the window
    window: float
    server_cpu: dict[str, float]   # name -> CPU seconds of that process inside the window


def run_workers(procs: list, out: mp.Queue, load: Load, server_pids: dict[str, int] | None) -> BlastResult:
    """Start the load processes, sample the CPU time of ``server_pids`` over the load's
    window, and sum the workers' results (tls_blast.py shares it)."""
    from .procs import cpu_seconds
    for p in procs:
        p.start()
    pids = server_pids or {}
    time.sleep(max(0.0, load.start_at + load.warmup - time.monotonic()))
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    time.sleep(max(0.0, load.start_at + load.warmup + load.seconds - time.monotonic()))
    after = {name: cpu_seconds(pid) for name, pid in pids.items()}
    results = [out.get(timeout=load.seconds + load.warmup + 60) for _ in procs]
    for p in procs:
        p.join(30)
    errors: dict[int, int] = {}
    for r in results:
        for code, n in r.errors.items():
            errors[code] = errors.get(code, 0) + n
    responses = sum(r.responses for r in results)
    return BlastResult(rate=responses / load.seconds, responses=responses, errors=errors,
                       generator_cpu=sum(r.cpu_seconds for r in results), window=load.seconds,
                       server_cpu={name: after[name] - before[name] for name in pids})


def blast(load_host: str, load_port: int, error_offset: int, frames: Sequence[bytes], *, mode: str,
          workers: int = 2, window_size: int = 128, connections: int = 1, seconds: float = 5.0,
          warmup: float = 1.0, server_pids: dict[str, int] | None = None, rate: float = 0.0) -> BlastResult:
    """Run ``workers`` load processes over ``frames`` (split between them) and sample the
    CPU time of ``server_pids`` over the same window. ``rate``: requests/s of all workers
    together (mode ``paced``)."""
    ctx = mp.get_context("fork")
    out: mp.Queue = ctx.Queue()
    start_at = time.monotonic() + 1.0 + 0.002 * connections * workers     # time to connect
    load = Load(load_host, load_port, error_offset, start_at, warmup, seconds)
    shares = [frames[i::workers] for i in range(workers)]
    if mode == "pipelined":
        procs = [ctx.Process(target=pipelined_worker, args=(load, share, window_size, out)) for share in shares]
    elif mode == "closed_loop":
        procs = [ctx.Process(target=closed_loop_worker, args=(load, share, connections, out)) for share in shares]
    elif mode == "paced":
        if rate <= 0:
            raise ValueError("mode paced needs rate > 0")
        procs = [ctx.Process(target=paced_worker, args=(load, share, connections, rate / workers, out))
                 for share in shares]
    else:
        raise ValueError(f"unknown mode {mode!r}")
    return run_workers(procs, out, load, server_pids)
