"""`blast`'s pipelined load over TLS or plain TCP, one code path for both (bench_security.py).

The same worker as loadgen.blast.pipelined_worker (one connection per worker, ``window``
requests in flight, responses counted by walking size prefixes inside the measured window),
except that the socket is wrapped in TLS when ``ssl_ca`` is given (the CA that signed the
server's certificate; hostname verification against ``server_hostname``). With ``ssl_ca=None``
it is plain TCP, so TLS off and on are measured by the same generator. With ``sasl_plain``
(user, password) the connection first authenticates with SaslHandshake v1 + SaslAuthenticate
v1, mechanism PLAIN (a SASL_SSL or SASL_PLAINTEXT listener), before the measured load.
"""
from __future__ import annotations

import multiprocessing as mp
import socket
import ssl
import struct
import time
from collections.abc import Sequence

from .blast import BlastResult, Load, run_pipelined, run_workers


def _call(sock: socket.socket, api_key: int, version: int, body: bytes) -> bytes:
    """One request (header v1, client id "bench") and its response body after the correlation id."""
    client = b"bench"
    frame = struct.pack(">hhih", api_key, version, 1, len(client)) + client + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head))
    (size,) = struct.unpack(">i", head)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise RuntimeError("server closed the connection during SASL")
        data += chunk
    return data[4:]


def _sasl_plain(sock: socket.socket, user: str, password: str) -> None:
    mechanism = b"PLAIN"
    answer = _call(sock, 17, 1, struct.pack(">h", len(mechanism)) + mechanism)    # SaslHandshake v1
    (code,) = struct.unpack_from(">h", answer)
    if code:
        raise RuntimeError(f"SaslHandshake PLAIN: error {code}")
    token = b"\0" + user.encode() + b"\0" + password.encode()
    answer = _call(sock, 36, 1, struct.pack(">i", len(token)) + token)           # SaslAuthenticate v1
    (code,) = struct.unpack_from(">h", answer)
    if code:
        raise RuntimeError(f"SaslAuthenticate PLAIN as {user}: error {code}")


def _connect(load: Load, ssl_ca: str | None, server_hostname: str,
             sasl_plain: tuple[str, str] | None = None) -> socket.socket:
    sock = socket.create_connection((load.host, load.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if ssl_ca is not None:
        context = ssl.create_default_context(cafile=ssl_ca)
        sock = context.wrap_socket(sock, server_hostname=server_hostname)
    if sasl_plain is not None:
        _sasl_plain(sock, *sasl_plain)
    return sock


def pipelined_worker(load: Load, frames: Sequence[bytes], window_size: int, ssl_ca: str | None,
                     server_hostname: str, sasl_plain: tuple[str, str] | None, out: mp.Queue) -> None:
    run_pipelined(_connect(load, ssl_ca, server_hostname, sasl_plain), load, frames, window_size, out)


def blast_pipelined(host: str, port: int, error_offset: int, frames: Sequence[bytes], *, ssl_ca: str | None,
                    server_hostname: str = "localhost", sasl_plain: tuple[str, str] | None = None,
                    workers: int = 2, window_size: int = 128,
                    seconds: float = 5.0, warmup: float = 1.0,
                    server_pids: dict[str, int] | None = None) -> BlastResult:
    """``workers`` pipelined load processes over ``frames``; the CPU of ``server_pids`` is
    sampled over the same window (as loadgen.blast.blast)."""
    ctx = mp.get_context("fork")
    out: mp.Queue = ctx.Queue()
    start_at = time.monotonic() + 1.0 + 0.01 * workers     # time to connect (and handshake)
    load = Load(host, port, error_offset, start_at, warmup, seconds)
    shares = [frames[i::workers] for i in range(workers)]
    procs = [ctx.Process(target=pipelined_worker,
                         args=(load, share, window_size, ssl_ca, server_hostname, sasl_plain, out))
             for share in shares]
    return run_workers(procs, out, load, server_pids)
