"""EmbeddedTansu's own duties, with a stand-in broker (a small script named by
CALF_TANSU_BIN): its output file is bounded, a start failure releases the exit watch, and
nothing but prctl runs in the child between fork and exec (review 14)."""
from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from coordinator.upstream import embedded
from coordinator.upstream.embedded import EmbeddedTansu, rotated_path

# Listens on --listener-url like Tansu, writes LINES lines of junk, then "done", then waits.
FAKE_BROKER = textwrap.dedent("""\
    #!{python}
    import os, socket, sys, time
    url = sys.argv[sys.argv.index("--listener-url") + 1]
    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
    if os.environ.get("FAKE_EXIT"):
        print("boom: cannot start", flush=True)
        sys.exit(int(os.environ["FAKE_EXIT"]))
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port))); s.listen()
    for i in range(int(os.environ.get("FAKE_LINES", "0"))):
        sys.stdout.write("junk from a client %08d %s\\n" % (i, "x" * 90))
    print("done", flush=True)
    while True:
        time.sleep(60)
""")


@pytest.fixture
def fake_broker(tmp_path, monkeypatch) -> Path:
    script = tmp_path / "fake-tansu"
    script.write_text(FAKE_BROKER.format(python=sys.executable))
    script.chmod(0o755)
    monkeypatch.setenv("CALF_TANSU_BIN", str(script))
    return script


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds}s: {what}")
        time.sleep(0.02)


def read_or_empty(path: Path) -> bytes:
    """The file's bytes; empty while it does not exist (between a rotation's rename and the
    new file)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_the_broker_output_file_is_rotated_once_past_its_cap(fake_broker, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_LINES", "20000")        # ~2 MB of output
    log_path = tmp_path / "broker.log"
    cap = 256 * 1024

    async def run():
        broker = EmbeddedTansu(log_path=log_path, log_max_bytes=cap)
        await broker.start()
        try:
            await asyncio.to_thread(wait_for, lambda: b"done" in read_or_empty(log_path), 60,
                                    "the broker's last line in its log")
        finally:
            await broker.stop()
        return broker.output_tail(200)

    tail = asyncio.run(run())
    assert log_path.stat().st_size <= cap
    assert rotated_path(log_path).stat().st_size <= cap
    assert "done" in tail and "junk from a client 00019999" in tail
    assert sorted(p.name for p in tmp_path.glob("broker.log*")) == ["broker.log", "broker.log.1"]


def test_a_start_failure_reports_the_output_and_releases_the_exit_watch(fake_broker, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_EXIT", "3")
    # The start loop's poll() sees the exit before the pidfd's reader callback has run (the
    # order that leaked the pidfd): here the callback never gets to release it.
    monkeypatch.setattr(EmbeddedTansu, "_on_exit_readable", lambda self, loop: None)

    async def run():
        before = open_fds()
        broker = EmbeddedTansu(log_path=tmp_path / "broker.log")
        with pytest.raises(RuntimeError) as failed:
            await broker.start()
        pump = getattr(broker, "_pump", None)     # the output copy ends with the broker
        if pump is not None:
            pump.join(5)
        return broker, before, open_fds(), str(failed.value)

    broker, before, after, message = asyncio.run(run())
    assert "exit status 3 at start" in message and "boom: cannot start" in message, message
    assert broker._watch_fd is None
    assert after <= before, f"file descriptors leaked by a failed start: {sorted(after - before)}"


def test_nothing_but_prctl_runs_between_fork_and_exec(fake_broker, tmp_path, monkeypatch):
    """ctypes.CDLL (dlopen) in the forked child can deadlock on a lock another thread held
    at fork; libc's prctl is resolved in the parent."""
    calls = tmp_path / "cdll-calls"
    real = embedded.ctypes.CDLL

    def recording_cdll(*args, **kwargs):
        with open(calls, "a") as f:
            f.write(f"{os.getpid()}\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(embedded.ctypes, "CDLL", recording_cdll)

    async def run():
        broker = EmbeddedTansu(log_path=tmp_path / "broker.log")
        await broker.start()
        pid = broker.pid
        await broker.stop()
        return pid

    child = asyncio.run(run())
    pids = set(calls.read_text().split()) if calls.exists() else set()
    assert str(child) not in pids and pids <= {str(os.getpid())}, pids
