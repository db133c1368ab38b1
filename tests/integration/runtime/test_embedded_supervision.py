"""`kcoord serve` without --upstream supervises its embedded Tansu broker, both ways.

- kcoord killed by any signal (SIGKILL included) takes the broker with it: the broker runs
  with PR_SET_PDEATHSIG, so no orphan keeps the port and the memory.
- The broker dying takes kcoord down: an ERROR line with the exit status and the tail of
  the broker's output, then a non-zero exit so a supervisor restarts both (a memory-store
  broker restarted alone would be a fresh, empty cluster under kcoord's feet).
"""
from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

from support import processes
from support.kcoord import REPO, free_port_block, launch_serve
from support.wait import wait_until

EXIT_EMBEDDED_BROKER_EXITED = 3   # coordinator.cli.EXIT_EMBEDDED_BROKER_EXITED


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (an orphan reaped by init vanishes)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _start_embedded(tmp_path: Path, names) -> tuple:
    port = free_port_block(2)
    broker_log = tmp_path / "embedded-tansu.log"
    lines: list[str] = []
    args = [sys.executable, "-m", "coordinator.cli", "serve", "--listen", f"127.0.0.1:{port}",
            "--state-topic", f"__kcoord_{names.topic()}", "--state-partitions", "4",
            "--embedded-log", str(broker_log)]
    process, log_path = launch_serve(args, REPO, f"kcoord-embedded-{port}", lines, timeout=30)
    banner = next((line for line in lines if "embedded Tansu pid" in line), "")
    match = re.search(r"embedded Tansu pid (\d+).*broker output: (\S+)\)", banner)
    assert match, f"kcoord did not name the embedded broker's pid and log file; stdout: {lines}"
    assert Path(match.group(2)) == broker_log
    return process, log_path, int(match.group(1)), broker_log


def test_kill_9_of_kcoord_takes_the_embedded_broker_with_it(tmp_path, names):
    process, _, tansu_pid, _ = _start_embedded(tmp_path, names)
    try:
        assert _alive(tansu_pid), "the embedded broker should run while kcoord does"
        processes.kill(process)   # SIGKILL: no finally block, no atexit runs in kcoord
        wait_until(lambda: not _alive(tansu_pid), timeout=5,
                   message=f"embedded Tansu pid {tansu_pid} to die with its kcoord (PR_SET_PDEATHSIG)")
    finally:
        if _alive(tansu_pid):
            os.kill(tansu_pid, signal.SIGKILL)


def test_sigterm_of_kcoord_stops_the_embedded_broker_and_exits_0(tmp_path, names):
    process, log_path, tansu_pid, _ = _start_embedded(tmp_path, names)
    try:
        rc = processes.stop(process, timeout=20)
        assert rc == 0, f"kcoord exited {rc} on SIGTERM; log:\n{log_path.read_text()[-3000:]}"
        assert not _alive(tansu_pid), "embedded Tansu still running after kcoord's clean exit"
    finally:
        if _alive(tansu_pid):
            os.kill(tansu_pid, signal.SIGKILL)


def test_embedded_broker_death_is_logged_and_kcoord_exits_non_zero(tmp_path, names):
    process, log_path, tansu_pid, broker_log = _start_embedded(tmp_path, names)
    try:
        assert "tansu broker" in broker_log.read_text(errors="replace"), \
            f"the broker's start banner should be in {broker_log}"
        os.kill(tansu_pid, signal.SIGKILL)
        rc, log = processes.exited(process, log_path, 20, "its embedded broker died")
        assert rc == EXIT_EMBEDDED_BROKER_EXITED, f"kcoord exited {rc}; log:\n{log[-3000:]}"
        error = next((line for line in log.splitlines()
                      if " ERROR " in line and "embedded Tansu broker" in line), None)
        assert error is not None, f"no ERROR line about the embedded broker; log:\n{log[-3000:]}"
        assert "killed by signal 9 (SIGKILL)" in error
        assert "fresh, empty cluster" in error
        # The tail of the broker's own output follows the ERROR line.
        assert "tansu broker" in log[log.index(error):], f"no broker output quoted; log:\n{log[-3000:]}"
        assert "Traceback" not in log, f"kcoord's exit should be orderly; log:\n{log[-3000:]}"
    finally:
        if process.poll() is None:
            processes.kill(process)
