"""Child processes the harness started, so none outlives the test run.

Fixtures stop what they start; this registry is the backstop for an interrupted
run (Ctrl-C, pytest-timeout's signal method, an exception in a fixture): at
interpreter exit every tracked child still running gets SIGKILL.
"""
from __future__ import annotations

import atexit
import subprocess
import threading

_lock = threading.Lock()
_children: set[subprocess.Popen] = set()


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
