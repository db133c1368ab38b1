"""py-spy around a measured stretch of a server process: a flame graph and the top functions.

py-spy (PyPI `py-spy`, installed into the venv for benchmarks) samples another process
without slowing it much; ``--nonblocking`` does not pause the target while sampling.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")


class Profile:
    """``with Profile(pid, "out", seconds):`` records OUT.svg (flame graph) and OUT.txt
    (collapsed stacks, one line per function), then prints the top functions."""

    def __init__(self, pid: int, out: str, seconds: float, rate: int = 250) -> None:
        self.pid, self.out, self.seconds, self.rate = pid, out, max(1, int(seconds + 0.999)), rate
        self._procs: list[subprocess.Popen] = []

    def __enter__(self) -> Profile:
        common = [PY_SPY, "record", "--pid", str(self.pid), "--duration", str(self.seconds),
                  "--rate", str(self.rate), "--nonblocking"]
        self._procs = [
            subprocess.Popen([*common, "--output", f"{self.out}.svg"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            subprocess.Popen([*common, "--function", "--format", "raw", "--output", f"{self.out}.txt"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        ]
        time.sleep(0.5)    # py-spy attaches
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self._procs:
            p.wait(self.seconds + 60)
        print(f"profile: {self.out}.svg (flame graph), {self.out}.txt (collapsed stacks)")
        print_top(f"{self.out}.txt")


def print_top(raw: str, n: int = 25) -> None:
    """Self time and inclusive time per function, from py-spy's collapsed stacks."""
    total = 0
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    for line in Path(raw).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        k = int(count)
        total += k
        frames = stack.split(";")
        own[frames[-1]] = own.get(frames[-1], 0) + k
        for f in set(frames):
            inclusive[f] = inclusive.get(f, 0) + k
    print(f"top {n} by self time ({total} samples):")
    for f, k in sorted(own.items(), key=lambda kv: -kv[1])[:n]:
        print(f"  {100 * k / total:5.1f}%  {f}")
    print(f"top {n} by inclusive time:")
    for f, k in sorted(inclusive.items(), key=lambda kv: -kv[1])[:n]:
        print(f"  {100 * k / total:5.1f}%  {f}")


