"""Child processes the harness started, so none outlives the test run.

Fixtures stop what they start; this registry is the backstop for an interrupted
run (Ctrl-C, pytest-timeout's signal method, an exception in a fixture): at
interpreter exit every tracked child still running gets SIGKILL. A run killed
outright (SIGTERM, SIGKILL: no atexit) is covered by `orphan_guard`: brokers and
kcoord processes started from the main thread get PR_SET_PDEATHSIG, as kcoord's
embedded Tansu does, so the kernel kills them with the test process.
"""
from __future__ import annotations

import atexit
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from coordinator.upstream.embedded import _die_with_parent, _resolve_prctl

_lock = threading.Lock()
_children: set[subprocess.Popen] = set()


def orphan_guard() -> Callable[[], None] | None:
    """A Popen ``preexec_fn`` that makes the child die with this process, or None off the
    main thread: the kernel signals when the forking *thread* exits, and a helper thread
    may end long before the test that uses the child."""
    if threading.current_thread() is not threading.main_thread():
        return None
    prctl, parent = _resolve_prctl(), os.getpid()
    return lambda: _die_with_parent(prctl, parent)


def track(proc: subprocess.Popen) -> subprocess.Popen:
    with _lock:
        _children.add(proc)
    return proc


def untrack(proc: subprocess.Popen) -> None:
    with _lock:
        _children.discard(proc)


def stop(proc: subprocess.Popen, timeout: float) -> int:
    """SIGTERM, wait up to ``timeout`` s, then SIGKILL. Returns the exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    untrack(proc)
    return proc.returncode


def close_by_stdin(proc: subprocess.Popen, line: str, timeout: float) -> int:
    """Ask a client process to close by writing ``line`` to its stdin and closing it (the test
    clients read their commands there), wait up to ``timeout`` s, then SIGKILL. Returns the
    exit code; the process is no longer tracked afterwards."""
    if proc.poll() is None:
        try:
            proc.stdin.write(line + "\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
        except (BrokenPipeError, OSError):
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill(proc)
    untrack(proc)
    return proc.returncode


def exited(proc: subprocess.Popen, log_path: Path, timeout: float, why: str) -> tuple[int, str]:
    """(exit code, log text) of a kcoord expected to exit within ``timeout`` s (``why``: what
    should have made it exit); it is no longer tracked afterwards."""
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"kcoord still running {timeout:g} s after {why}; log:\n"
                             f"{log_path.read_text(errors='replace')[-3000:]}") from None
    untrack(proc)
    return rc, log_path.read_text(errors="replace")


def kill(proc: subprocess.Popen) -> int:
    """SIGKILL and reap. Returns the exit code (-9 unless it had already exited)."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    untrack(proc)
    return proc.returncode


@atexit.register
def _kill_leftovers() -> None:
    with _lock:
        leftovers = list(_children)
    for proc in leftovers:
        if proc.poll() is None:
            proc.kill()
