"""Kubernetes probes for a kcoord pod: `python probe.py live|ready [--port 9092] [--metrics-port 9404]`.

Rules: standard library only and no kcoord import (it runs every few seconds in the pod,
so it must start in tens of milliseconds); exit 0 = healthy, 1 = not, with one line
saying what failed; every step is bounded by `--timeout`.

- `live`: kcoord answers an ApiVersions v0 request on its PLAINTEXT listener. kcoord answers
  ApiVersions itself, on its event loop (never forwarded upstream), so this fails when the
  loop is stuck, and does not fail when the upstream Kafka is down (a restart would not
  help then). A TCP connect alone would not do: the kernel accepts connections on the
  listening socket while the loop is blocked.
- `ready`: `live`, and on /metrics: `kcoord_serving` is 1 (in a kcoord cluster: the
  membership lease is valid, so this instance holds its assignment and may answer; a
  kcoord without the gauge is not held to it), and no state-topic partition of this
  process is loading or failed (`kcoord_coordinator_partitions{state="loading"|"failed"}`
  = 0): a shard still loading answers COORDINATOR_LOAD_IN_PROGRESS, so the bootstrap
  Service should send clients to the other instances meanwhile.
  kcoord has no /ready path of its own (its metrics server is prometheus_client's, serving
  the same text on every path), hence the metrics.
"""
from __future__ import annotations

import argparse
import socket
import struct
import sys
import urllib.request

_API_VERSIONS = 18
_CORRELATION_ID = 0x6B636F  # "kco": any value; the answer must echo it


def api_versions_v0(host: str, port: int, timeout: float) -> int:
    """The error code of kcoord's ApiVersions v0 answer (header v0: correlation id only)."""
    client_id = b"kcoord-probe"
    body = struct.pack(">hhih", _API_VERSIONS, 0, _CORRELATION_ID, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _read(s, 4))[0]
        if not 6 <= size <= 1 << 20:
            raise ValueError(f"answer size {size} out of range")
        answer = _read(s, size)
    correlation, error = struct.unpack(">ih", answer[:6])
    if correlation != _CORRELATION_ID:
        raise ValueError(f"answer for correlation id {correlation}, sent {_CORRELATION_ID}")
    return error


def _read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return out


def unready_partitions(metrics_text: str) -> dict[str, float]:
    """state -> count for the states that keep a pod out of the bootstrap Service."""
    out = {}
    for line in metrics_text.splitlines():
        for state in ("loading", "failed"):
            if line.startswith(f'kcoord_coordinator_partitions{{state="{state}"}} '):
                value = float(line.rsplit(" ", 1)[1])
                if value:
                    out[state] = value
    return out


def serving(metrics_text: str) -> bool:
    """False only when `kcoord_serving` is exported and not 1."""
    for line in metrics_text.splitlines():
        if line.startswith("kcoord_serving "):
            return float(line.split(" ", 1)[1]) == 1
    return True


def check(kind: str, host: str, port: int, metrics_port: int, timeout: float) -> str | None:
    """None when healthy, else what is wrong."""
    try:
        error = api_versions_v0(host, port, timeout)
    except (OSError, ValueError) as e:
        return f"ApiVersions on {host}:{port}: {e}"
    if error:
        return f"ApiVersions on {host}:{port} answered error code {error}"
    if kind == "live":
        return None
    try:
        with urllib.request.urlopen(f"http://{host}:{metrics_port}/metrics", timeout=timeout) as r:
            text = r.read().decode()
    except OSError as e:
        return f"metrics on {host}:{metrics_port}: {e}"
    if not serving(text):
        return "kcoord_serving is 0: this instance has no valid membership lease (it answers nothing)"
    unready = unready_partitions(text)
    if unready:
        return "state-topic partitions not active: " + ", ".join(f"{n:g} {s}" for s, n in sorted(unready.items()))
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="probe.py", description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=("live", "ready"))
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9092, help="a PLAINTEXT listener's bootstrap port")
    p.add_argument("--metrics-port", type=int, default=9404)
    p.add_argument("--timeout", type=float, default=3.0, help="seconds, for each connection and answer")
    args = p.parse_args(argv)
    problem = check(args.kind, args.host, args.port, args.metrics_port, args.timeout)
    if problem:
        print(f"kcoord {args.kind}: {problem}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
