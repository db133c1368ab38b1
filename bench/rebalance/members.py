"""Group members as OS processes, read into the test harness's event log.

Both clients print the harness's JSON-line events on stdout: librdkafka through
migration/rehearse/rdkafka_member.py, the Java 4.4 client through ConsumerDriver
(migration/rehearse/java). ProcessMember feeds them into a support.consumer_events
log (and so an OwnershipLedger, if given), keeps the client's stderr (librdkafka's
``debug=cgrp`` log) in a file, and stops a member cleanly through stdin.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from support import processes
from support.consumer_events import EventLogConsumer
from support.ownership import OwnershipLedger

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
Client = Literal["rdkafka", "java"]


def rdkafka_argv(bootstrap: str, topic: str, group: str, *, protocol: str, assignor: str | None = None,
                 session_timeout_ms: int = 6000, heartbeat_interval_ms: int = 2000, wait_go: bool = False,
                 client_id: str | None = None, props: dict[str, str] | None = None) -> list[str]:
    # The rehearsal's member process; a 50 ms poll keeps its record stamps fine-grained.
    argv = [sys.executable, "-m", "migration.rehearse.rdkafka_member", "--bootstrap", bootstrap, "--topic", topic,
            "--group", group, "--group-protocol", protocol, "--session-timeout-ms", str(session_timeout_ms),
            "--heartbeat-interval-ms", str(heartbeat_interval_ms), "--poll-timeout", "0.05"]
    if assignor:
        argv += ["--assignor", assignor]
    if wait_go:
        argv.append("--wait-go")
    if client_id:
        argv += ["--client-id", client_id]
    for k, v in (props or {}).items():
        argv += ["--prop", f"{k}={v}"]
    return argv


def java_argv(bootstrap: str, topic: str, group: str, *, protocol: str, assignor: str | None = None,
              session_timeout_ms: int = 6000, heartbeat_interval_ms: int = 2000,
              client_id: str | None = None, props: dict[str, str] | None = None) -> list[str]:
    from support.java import java_command
    args = ["--bootstrap", bootstrap, "--topics", topic, "--group", group, "--group-protocol", protocol,
            "--commit", "manual", "--poll-ms", "100"]
    if client_id:
        args += ["--client-id", client_id]
    if protocol == "classic":
        args += ["--session-timeout-ms", str(session_timeout_ms), "--heartbeat-interval-ms",
                 str(heartbeat_interval_ms)]
        if assignor:
            args += ["--assignor", assignor]
    for k, v in (props or {}).items():
        args += ["--prop", f"{k}={v}"]
    return java_command("ConsumerDriver", args)


class ProcessMember(EventLogConsumer):
    def __init__(self, name: str, argv: Sequence[str], ledger: OwnershipLedger | None = None,
                 log_dir: Path | None = None) -> None:
        super().__init__(name, ledger)
        self.argv = list(argv)
        self.stderr_path = Path(log_dir or tempfile.gettempdir()) / f"member-{name}-{os.getpid()}.log"
        self.process: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    def start(self, wait_for: str | None = "ready", timeout: float = 30.0) -> ProcessMember:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
        self._stderr = open(self.stderr_path, "w")
        self.process = processes.track(subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
            encoding="utf-8", errors="replace", bufsize=1, env=env, cwd=str(REPO)))
        self._reader = threading.Thread(target=self._read, name=f"{self.member}-out", daemon=True)
        self._reader.start()
        if wait_for:
            self.wait_ready(wait_for, timeout)
        return self

    def wait_ready(self, kind: str = "ready", timeout: float = 30.0) -> None:
        proc = self.process
        assert proc is not None
        self.wait_for(lambda: self.events(kind) or proc.poll() is not None, timeout, kind)
        if not self.events(kind):
            raise RuntimeError(f"{self.member} exited ({proc.returncode}) before {kind!r}: "
                               f"{self.stderr_text()[-2000:]}")

    def send(self, line: str) -> None:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def close(self, timeout: float = 30.0) -> int:
        """Clean stop: commit, revoke, leave the group. A member never started: nothing to do."""
        proc = self.process
        if proc is None:
            return 0
        if proc.poll() is None:
            try:
                self.send("close")
                proc.stdin.close()  # type: ignore[union-attr]
            except (BrokenPipeError, OSError, ValueError):
                pass
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait(10)
        processes.untrack(proc)
        if self._reader is not None:
            self._reader.join(5)
        self._stderr.close()
        return rc

    def shutdown(self) -> None:
        if self.process is not None:
            self.close(timeout=20)

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict) and "t" in ev and "event" in ev:
                self.log.apply(ev)
