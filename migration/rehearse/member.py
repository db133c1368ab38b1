"""Group members as OS processes: one process per incarnation, so a restart is a real one.

Both clients speak the same JSON-line event protocol on stdout (see rdkafka_member.py
and java/ConsumerDriver.java); a MemberProcess keeps those events, plus three of its own
stamped by the parent: "spawned" (process started), "close_requested" and "exited".
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from . import java_jars

Client = Literal["rdkafka", "java"]
Protocol = Literal["classic", "consumer"]
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the dir holding migration/


@dataclass(frozen=True, slots=True)
class MemberSettings:
    """How every member process is started (the group-wide part of a rehearsal plan)."""

    bootstrap: str
    topic: str
    group: str
    client: Client = "rdkafka"
    # Classic-only client settings (KIP-848 members take theirs from the coordinator).
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 1_000
    assignor: str | None = None
    java_cache: Path | None = None


def member_argv(settings: MemberSettings, protocol: Protocol, client_id: str) -> list[str]:
    """The command line of one member process."""
    s = settings
    common = ["--bootstrap", s.bootstrap, "--group", s.group, "--group-protocol", protocol, "--client-id", client_id]
    classic = []
    if protocol == "classic":
        classic = ["--session-timeout-ms", str(s.session_timeout_ms),
                   "--heartbeat-interval-ms", str(s.heartbeat_interval_ms)]
        if s.assignor:
            classic += ["--assignor", s.assignor]
    if s.client == "rdkafka":
        return [sys.executable, "-m", "migration.rehearse.rdkafka_member", "--topic", s.topic, *common, *classic]
    if s.client == "java":
        return java_jars.java_command("ConsumerDriver", ["--topics", s.topic, *common, *classic], cache=s.java_cache)
    raise ValueError(f"unknown client {s.client!r}: expected 'rdkafka' or 'java'")


class MemberProcess:
    """One incarnation of one member slot."""

    def __init__(self, slot: int, incarnation: int, protocol: Protocol, argv: list[str], client_id: str) -> None:
        self.slot = slot
        self.incarnation = incarnation
        self.protocol = protocol
        self.client_id = client_id
        self.argv = argv
        self.process: subprocess.Popen | None = None
        self._cond = threading.Condition()
        self._events: list[dict[str, Any]] = []
        self._assignment: set[tuple[str, int]] = set()
        self._stderr: deque[str] = deque(maxlen=200)
        self._noise: deque[str] = deque(maxlen=50)
        self._readers: list[threading.Thread] = []

    @property
    def name(self) -> str:
        return f"m{self.slot}#{self.incarnation}"

    def start(self) -> MemberProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(p for p in (str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")) if p)}
        self._stamp("spawned", protocol=self.protocol, client_id=self.client_id)
        self.process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace",
                                        bufsize=1, env=env)
        self._readers = [threading.Thread(target=self._read_stdout, daemon=True, name=f"{self.name}-out"),
                         threading.Thread(target=self._read_stderr, daemon=True, name=f"{self.name}-err")]
        for t in self._readers:
            t.start()
        return self

    # --- views ------------------------------------------------------------------------------

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self._events if kind is None or e["event"] == kind]

    def assignment(self) -> frozenset[tuple[str, int]]:
        with self._cond:
            return frozenset(self._assignment)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def fatal_errors(self) -> list[dict[str, Any]]:
        return [e for e in self.events("error") if e.get("fatal")]

    def stderr_tail(self, lines: int = 40) -> str:
        return "\n".join(list(self._stderr)[-lines:])

    # --- stopping ---------------------------------------------------------------------------

    def close(self, timeout: float = 45.0, command: str = "close") -> int | None:
        """Clean stop: the member commits, revokes and leaves the group (``command`` on stdin; the
        Streams application also takes "close remain"). kill -9 after ``timeout``."""
        proc = self._require()
        self._stamp("close_requested", command=command)
        if proc.poll() is None:
            try:
                proc.stdin.write(command + "\n")  # type: ignore[union-attr]
                proc.stdin.close()  # type: ignore[union-attr]
            except (BrokenPipeError, OSError):
                pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            self._stamp("error", error="CloseTimeout", message=f"still running {timeout}s after close; killed",
                        fatal=True)
        return self._finish()

    def kill(self) -> int | None:
        proc = self._require()
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        return self._finish()

    def _finish(self) -> int | None:
        for t in self._readers:
            t.join(5)
        rc = self._require().returncode
        self._stamp("exited", returncode=rc)
        with self._cond:
            self._assignment.clear()
        return rc

    def _require(self) -> subprocess.Popen:
        if self.process is None:
            raise RuntimeError(f"{self.name}: not started")
        return self.process

    # --- event intake -----------------------------------------------------------------------

    def _stamp(self, kind: str, **fields: Any) -> None:
        self._apply({"t": time.monotonic_ns(), "event": kind, **fields})

    def _apply(self, ev: dict[str, Any]) -> None:
        kind = ev["event"]
        with self._cond:
            self._events.append(ev)
            if kind in ("assigned", "revoked", "lost"):
                tps = {(str(t), int(p)) for t, p in ev.get("partitions", ())}
                if kind == "assigned":
                    self._assignment |= tps
                else:
                    self._assignment -= tps
            self._cond.notify_all()

    def _read_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        read_events(self.process.stdout, self._apply, self._noise)

    def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        read_lines(self.process.stderr, self._stderr)


def read_events(stream, on_event, noise) -> None:
    """Read a member process's stdout until it closes: each line a JSON event with "t" and
    "event"; any other line goes to ``noise`` (kept, so a stray print is visible)."""
    for line in stream:
        line = line.strip()
        if not line:
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            noise.append(line)
            continue
        if isinstance(ev, dict) and "t" in ev and "event" in ev:
            on_event(ev)
        else:
            noise.append(line)


def read_lines(stream, sink) -> None:
    for line in stream:
        sink.append(line.rstrip("\n"))
