"""`kcoord serve --processes N`: N kcoord processes on one host, one cluster.

Each child is a plain `kcoord serve --instance-id <base>-<i>` with the same arguments, its
ports shifted by i * --port-stride (every --listen port and --metrics-port), so the
children form a cluster through their membership group exactly as processes on several
hosts do. The supervisor adds nothing to the cluster's safety; it only starts, restarts
and stops:
- a child that exits on its own is restarted with a bounded exponential backoff (it comes
  back with the same instance id, so it gets its shards back if it returns within the
  membership session timeout); a child refusing its configuration (exit 2) stops all;
- SIGTERM/SIGINT are passed on to every child (each leaves the group after finishing its
  writes); children still running after the grace period are killed;
- on Linux each child dies with the supervisor (PR_SET_PDEATHSIG), so a supervisor killed
  with -9 leaves no orphan serving a shard nobody supervises.
"""
from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import time

log = logging.getLogger("kcoord.supervisor")

EXIT_BAD_CONFIG = 2
GRACE_S = 30.0
_BACKOFF_MIN_S, _BACKOFF_MAX_S = 1.0, 30.0
_DROPPED = {"--processes", "--port-stride", "--instance-id"}
_SHIFTED = {"--listen", "--metrics-port"}


def _shift_listen(value: str, offset: int) -> str:
    items = []
    for item in value.split(","):
        item = item.strip()
        head, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"--listen {item!r}: expected [NAME://]HOST:PORT")
        items.append(f"{head}:{int(port) + offset if int(port) else 0}")
    return ",".join(items)


def child_argv(argv: list[str], index: int, stride: int, base_id: str, default_listen: str) -> list[str]:
    """The `kcoord ...` arguments of child `index` (argv as given to the supervisor)."""
    out: list[str] = []
    offset = index * stride
    saw_listen = False
    i = 0
    while i < len(argv):
        token = argv[i]
        name, eq, inline = token.partition("=")
        if name in _DROPPED or name in _SHIFTED:
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            i += 1 if eq else 2
            if name == "--listen":
                saw_listen = True
                out += ["--listen", _shift_listen(value, offset)]
            elif name == "--metrics-port":
                port = int(value)
                out += ["--metrics-port", str(port + index if port else 0)]
            continue
        out.append(token)
        i += 1
    if not saw_listen:
        out += ["--listen", _shift_listen(default_listen, offset)]
    out += ["--instance-id", f"{base_id}-{index}"]
    return out


def _die_with_parent() -> None:   # pragma: no cover - runs in the child before exec
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except OSError:
        pass


class _Child:
    def __init__(self, index: int, argv: list[str]) -> None:
        self.index = index
        self.argv = argv
        self.proc: subprocess.Popen | None = None
        self.backoff = _BACKOFF_MIN_S
        self.restart_at = 0.0

    def start(self) -> None:
        cmd = [sys.executable, "-m", "coordinator.cli", *self.argv]
        self.proc = subprocess.Popen(cmd, preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        log.info("started kcoord process %d (pid %d): %s", self.index, self.proc.pid, " ".join(self.argv))


def run_processes(args: argparse.Namespace, argv: list[str], default_listen: str) -> int:
    n = args.processes
    if n < 1:
        print(f"kcoord: --processes {n}: expected 1 or more", file=sys.stderr)
        return EXIT_BAD_CONFIG
    if not args.upstream:
        print("kcoord: --processes forms a kcoord cluster on a shared upstream: give --upstream",
              file=sys.stderr)
        return EXIT_BAD_CONFIG
    base = args.instance_id or "kcoord"
    try:
        children = [_Child(i, child_argv(argv, i, args.port_stride, base, default_listen)) for i in range(n)]
    except ValueError as e:
        print(f"kcoord: {e}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    stopping = False

    def on_signal(signum, frame) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for child in children:
        child.start()
    code = 0
    while not stopping:
        now = time.monotonic()
        for child in children:
            proc = child.proc
            if proc is None:
                if now >= child.restart_at:
                    child.start()
                continue
            rc = proc.poll()
            if rc is None:
                continue
            if rc == EXIT_BAD_CONFIG:
                log.error("kcoord process %d refused its configuration (exit 2); stopping all", child.index)
                stopping, code = True, EXIT_BAD_CONFIG
                break
            log.error("kcoord process %d exited with %d; restarting in %.0fs", child.index, rc, child.backoff)
            child.proc = None
            child.restart_at = now + child.backoff
            child.backoff = min(child.backoff * 2, _BACKOFF_MAX_S)
        time.sleep(0.2)     # the supervisor's own poll: nothing here waits on a condition it could miss
    for child in children:
        if child.proc is not None and child.proc.poll() is None:
            child.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    for child in children:
        if child.proc is None:
            continue
        try:
            child.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.error("kcoord process %d did not stop within %.0fs; killing it", child.index, GRACE_S)
            child.proc.kill()
            child.proc.wait()
    return code

