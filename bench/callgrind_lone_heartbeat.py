"""Instructions per steady ConsumerGroupHeartbeat that arrives alone, in a real `kcoord serve`
process: its socket read, the loop's wake-up, the gateway, the group and the write back.

    .venv/bin/python bench/callgrind_lone_heartbeat.py [--counter callgrind|cpu]
        [--repo DIR ...] [--heartbeats 500,2500] [--rounds 3] [--members 100] [--groups 10]
        [--connections 100] [--gap-ms 1] [--profile-dir DIR]

A Tansu broker (tests/support/tansu.py) is the upstream. One plain `kcoord serve` per
``--repo`` checkout (default: this one; give two to compare a base tree, e.g. a ``git
worktree``, with this one in one run) runs in front of it, each with its own state topic.
``--members`` simulated KIP-848 members (bench/loadgen) in ``--groups`` groups join through
their coordinator's listener and are Stable; then this script sends their pre-encoded steady
heartbeats over ``--connections`` sockets round robin, **one at a time**: each after the
previous answer has been read, plus ``--gap-ms``, so every heartbeat is a wake-up, a read
and a write of its own (what real members send: one heartbeat per member per interval).
Every answer's error code is checked (0).

Each measured window sends one of the two counts of ``--heartbeats`` to one kcoord; the
per-heartbeat figure is the difference of the two windows' counts over the difference of
their heartbeats, so what a window costs once (the zeroing and the dump) cancels out.
Windows alternate over the trees and the two lengths, ``--rounds`` times; medians are printed.

- ``--counter cpu``: kcoord runs plainly; its on-CPU time from /proc/PID/task/*/schedstat
  (nanoseconds) and the kernel's share from utime/stime (/proc/PID/stat, clock ticks). Both
  depend on the machine's load (this VM exposes no hardware counters to `perf stat`).
- ``--counter callgrind`` (default): user-space instructions. kcoord runs under `valgrind
  --tool=callgrind`, its instrumentation switched on once the groups are Stable; a window is
  `callgrind_control -z` before and `-d` after it, and the dump of the longer window of the
  last round is kept in ``--profile-dir`` for `callgrind_annotate --inclusive=yes`. Under
  valgrind a heartbeat takes milliseconds, so what kcoord does by the clock (its membership
  watch, the sweeps, the metadata refresh) weighs more per heartbeat than at real speed: an
  idle window (``--idle-seconds``) measures it per second first, and the figure printed is
  the windows' difference less that rate times the difference of their durations (the raw
  difference is printed too).

Compare trees with the same Python build in one run: the absolute count depends on both.
"""
from __future__ import annotations

import argparse
import asyncio
import glob
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench_cluster_heartbeat import TOPIC, frames_for  # noqa: E402  (the members subscribe to TOPIC)
from cluster.common import REPO, use_ports  # noqa: E402
from loadgen.wire import CONSUMER_GROUP_HEARTBEAT, response_error_offset  # noqa: E402

from support.group_probe import find  # noqa: E402
from support.kcoord import KcoordProcess, launch_serve  # noqa: E402
from support.raw_client import read_frame  # noqa: E402

# Sessions longer than any pause between a member's windows (the trees' windows alternate).
CONFIG = ("consumer_session_timeout_ms=1800000", "consumer_max_session_timeout_ms=1800000")


@dataclass
class Kcoord(KcoordProcess):
    """`kcoord serve` of the checkout ``repo``, optionally under a command prefix (valgrind)."""

    repo: Path = REPO
    prefix: tuple[str, ...] = ()
    socks: list[socket.socket] = field(default_factory=list)
    frames: list[bytes] = field(default_factory=list)

    def start(self, timeout: float = 600.0) -> Kcoord:
        if not self.port:
            self.assign_ports()
        self.process, self.log_path = launch_serve(
            [*self.prefix, *self.serve_args()], self.repo, f"kcoord-lone-{self.port}", self._lines, timeout,
            env={"PYTHONPATH": str(self.repo), "PYTHONHASHSEED": "0"})
        return self


def schedstat_ns(pid: int) -> int:
    """On-CPU nanoseconds of every thread of ``pid`` so far."""
    return sum(int(Path(t, "schedstat").read_text().split()[0]) for t in glob.glob(f"/proc/{pid}/task/*"))


def lone(k: Kcoord, n: int, start: int, gap: float, error_offset: int) -> None:
    """``n`` steady heartbeats, one at a time, round robin over the members and sockets."""
    frames, socks = k.frames, k.socks
    for i in range(start, start + n):
        sock = socks[i % len(socks)]
        sock.sendall(frames[i % len(frames)])
        answer = read_frame(sock)
        if answer is None:
            raise SystemExit(f"kcoord of {k.repo} closed a connection")
        code = int.from_bytes(answer[error_offset:error_offset + 2], "big")
        if code:
            raise SystemExit(f"kcoord of {k.repo} answered error {code}")
        if gap:
            time.sleep(gap)


class Counter:
    """What one window counted in kcoord: a dict of figures (totals over the window)."""

    def __init__(self, kind: str, profile_dir: Path) -> None:
        self.kind = kind
        self.profile_dir = profile_dir

    def begin(self, k: Kcoord) -> None:
        pid = k.process.pid
        if self.kind == "callgrind":
            subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)
        self._cpu = schedstat_ns(pid)
        self._ticks = ticks(pid)
        self._wall = time.monotonic()

    def end(self, k: Kcoord, keep: str | None = None) -> dict[str, float]:
        pid = k.process.pid
        user, system = ticks(pid)
        out = {"cpu_ns": float(schedstat_ns(pid) - self._cpu), "wall": time.monotonic() - self._wall,
               "utime": float(user - self._ticks[0]), "stime": float(system - self._ticks[1])}
        if self.kind == "callgrind":
            before = set(glob.glob(f"{k.dump_base}*"))
            subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
            (dump,) = set(glob.glob(f"{k.dump_base}*")) - before
            text = Path(dump).read_text(errors="replace")
            total = next(int(line.split()[1]) for line in text.splitlines()
                         if line.startswith(("summary:", "totals:")))
            out["user"] = float(total)
            if keep:
                os.replace(dump, self.profile_dir / keep)
            else:
                os.unlink(dump)
        return out


def ticks(pid: int) -> tuple[int, int]:
    """(utime, stime) of ``pid`` so far, in clock ticks (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counter", choices=("callgrind", "cpu"), default="callgrind")
    ap.add_argument("--repo", type=Path, action="append", help="a checkout to measure (repeatable)")
    ap.add_argument("--heartbeats", default="500,2500", help="the two window lengths")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--members", type=int, default=100)
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--gap-ms", type=float, default=1.0)
    ap.add_argument("--idle-seconds", type=float, default=5.0)
    ap.add_argument("--profile-dir", type=Path, default=Path(tempfile.gettempdir()))
    a = ap.parse_args()
    use_ports("22000-22999")
    from support.admin import create_topic
    from support.tansu import start_tansu

    repos = [r.resolve() for r in (a.repo or [REPO])]
    low, high = (int(x) for x in a.heartbeats.split(","))
    counter = Counter(a.counter, a.profile_dir)
    error_offset = response_error_offset(CONSUMER_GROUP_HEARTBEAT, 1)
    print(f"load average before: {os.getloadavg()}", flush=True)
    broker = start_tansu()
    kcoords: list[Kcoord] = []
    tmp = tempfile.mkdtemp(prefix="lone-heartbeat-")
    try:
        create_topic(broker.bootstrap, TOPIC, a.partitions)
        for i, repo in enumerate(repos):
            prefix: tuple[str, ...] = ()
            dump_base = f"{tmp}/callgrind.{i}"
            if a.counter == "callgrind":
                prefix = ("valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={dump_base}")
            k = Kcoord(broker.bootstrap, f"__kcoord_lone_{i}_{os.getpid()}", state_partitions=4,
                       config=CONFIG, repo=repo, prefix=prefix)
            k.dump_base = dump_base    # type: ignore[attr-defined]
            k.log_level = "WARNING"
            kcoords.append(k.start())
            print(f"kcoord of {repo} ready on {k.bootstrap} (pid {k.process.pid})", flush=True)
            groups = [f"lone-{g:04d}" for g in range(a.groups)]
            code, _, host, port = find(k.bootstrap, groups[0])
            if code:
                raise SystemExit(f"FindCoordinator answered {code}")
            k.frames = asyncio.run(frames_for(port, groups, a.members // a.groups, a.partitions))
            k.socks = [socket.create_connection((host, port)) for _ in range(a.connections)]
            for s in k.socks:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            lone(k, len(k.frames), 0, 0.0, error_offset)      # every member and socket once: warm
            if a.counter == "callgrind":
                subprocess.run(["callgrind_control", "-i", "on", str(k.process.pid)], check=True,
                               capture_output=True)
            print(f"  {len(k.frames)} members Stable", flush=True)
            if a.counter == "callgrind":
                counter.begin(k)
                time.sleep(a.idle_seconds)
                idle = counter.end(k)
                k.idle_rate = idle["user"] / idle["wall"]    # type: ignore[attr-defined]
                print(f"  idle: {k.idle_rate:,.0f} instructions/s under valgrind", flush=True)
        results: dict[Path, list[float]] = {r: [] for r in repos}
        kernel: dict[Path, list[float]] = {r: [] for r in repos}
        cpu: dict[Path, list[float]] = {r: [] for r in repos}
        sent = 0
        for rnd in range(a.rounds):
            for k in kcoords:
                windows = {}
                for n in (low, high):
                    counter.begin(k)
                    lone(k, n, sent, a.gap_ms / 1000, error_offset)
                    sent += n
                    keep = f"callgrind.lone.{k.repo.name}.out" if rnd == a.rounds - 1 and n == high else None
                    windows[n] = counter.end(k, keep)
                per = {key: (windows[high][key] - windows[low][key]) / (high - low) for key in windows[high]}
                cpu[k.repo].append(per["cpu_ns"] / 1000)
                line = f"round {rnd + 1} {k.repo}: {per['cpu_ns'] / 1000:.1f} us on-CPU per heartbeat"
                if "user" in per:
                    clock = k.idle_rate * per["wall"]    # type: ignore[attr-defined]
                    results[k.repo].append(per["user"] - clock)
                    line += (f", {per['user'] - clock:,.0f} user instructions ({per['user']:,.0f} less "
                             f"{clock:,.0f} of the idle rate)")
                if per["utime"] + per["stime"]:
                    system_share = per["stime"] / (per["utime"] + per["stime"])
                    kernel[k.repo].append(system_share)
                    line += f", kernel {system_share:.0%} of the CPU time"
                print(line, flush=True)
        print(f"\nmedians over {a.rounds} rounds, windows of {low} and {high} lone heartbeats, gap {a.gap_ms} ms, "
              f"{a.members} members / {a.connections} sockets, {sys.version.split()[0]}:")
        for r in repos:
            line = f"{r}: {statistics.median(cpu[r]):.1f} us on-CPU"
            if results[r]:
                line += f", {statistics.median(results[r]):,.0f} user instructions (idle rate taken off)"
            if kernel[r]:
                line += f" (kernel {statistics.median(kernel[r]):.0%})"
            print(line + " per lone heartbeat")
        print(f"load average after: {os.getloadavg()}")
        if a.counter == "callgrind":
            print(f"profiles: {a.profile_dir}/callgrind.lone.*.out (callgrind_annotate --inclusive=yes FILE)")
    finally:
        for k in kcoords:
            for s in k.socks:
                s.close()
            if k.process is not None and k.process.poll() is None:
                k.kill()
        broker.stop()


if __name__ == "__main__":
    main()
