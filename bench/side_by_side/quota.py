"""A CPU quota per process, with the kernel's CFS bandwidth control (a cgroup's `cpu.max` on
cgroup v2, `cpu.cfs_quota_us` / `cpu.cfs_period_us` on v1): a "device core" of a fraction of
a real one, so that N kcoord processes each on a core of its own fit on a machine that also
runs the broker and the load generators (on 2 cores, two whole cores for kcoord would leave
nothing for them, and the aggregate would measure the machine, not kcoord).

Rules: each process gets its own cgroup (all its threads move: a pid written to
`cgroup.procs` moves its thread group); the period is 10 ms, short, so a throttled process
waits at most a few ms at a time rather than most of a 100 ms default period; ``close``
moves every process back to the root group and removes the groups it made. Needs write
access to the cpu controller (root, as on the bench machines); otherwise ``QuotaError``
says which file refused.
"""
from __future__ import annotations

import os
from pathlib import Path

PERIOD_US = 10_000
V2_ROOT, V1_ROOT = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/cpu")


class QuotaError(RuntimeError):
    pass


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise QuotaError(f"writing {text.strip()!r} to {path}: {exc}") from exc


class CpuQuota:
    """``place(pid, cores)``: ``pid`` may use at most ``cores`` CPUs' time (e.g. 0.4)."""

    def __init__(self, prefix: str = "kcoord-bench") -> None:
        v2 = (V2_ROOT / "cgroup.controllers").exists()
        if v2 and "cpu" not in (V2_ROOT / "cgroup.controllers").read_text().split():
            raise QuotaError(f"cgroup v2 without the cpu controller at {V2_ROOT}")
        if not v2 and not (V1_ROOT / "cpu.cfs_quota_us").exists():
            raise QuotaError(f"no cpu controller at {V1_ROOT} (cgroup v1) or {V2_ROOT} (v2)")
        self.v2, self.root = v2, (V2_ROOT if v2 else V1_ROOT)
        self.prefix = f"{prefix}-{os.getpid()}"
        self.groups: dict[int, Path] = {}
        if v2:
            _write(self.root / "cgroup.subtree_control", "+cpu")

    def place(self, pid: int, cores: float) -> Path:
        group = self.groups.get(pid)
        if group is None:
            group = self.groups[pid] = self.root / f"{self.prefix}-{pid}"
            group.mkdir(exist_ok=True)
        quota = max(1000, int(cores * PERIOD_US))
        if self.v2:
            _write(group / "cpu.max", f"{quota} {PERIOD_US}")
        else:
            _write(group / "cpu.cfs_period_us", str(PERIOD_US))
            _write(group / "cpu.cfs_quota_us", str(quota))
        _write(group / "cgroup.procs", str(pid))
        return group

    def release(self, pid: int) -> None:
        """``pid`` back in the root group, without a quota (its group stays for ``close``)."""
        if pid in self.groups:
            _write(self.root / "cgroup.procs", str(pid))

    def throttled_s(self, pid: int) -> float:
        """How long the group of ``pid`` has been held back by its quota (cpu.stat)."""
        group = self.groups.get(pid)
        if group is None:
            return 0.0
        stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines() if line.strip())
        return int(stat.get("throttled_usec", 0)) / 1e6 if self.v2 else int(stat.get("throttled_time", 0)) / 1e9

    def close(self) -> None:
        for pid, group in self.groups.items():
            try:
                (self.root / "cgroup.procs").write_text(str(pid))
            except OSError:          # the process has ended
                pass
            try:
                group.rmdir()
            except OSError:
                pass
        self.groups.clear()
