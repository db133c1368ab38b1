"""One measured run of a harness under callgrind, shared by the in-process instruction counters
(bench/callgrind_gateway_heartbeat.py, bench/callgrind_write_path.py).

The harness re-runs itself with ``--plain`` under `valgrind --tool=callgrind` with collection
off; it does its set-up at valgrind's plain speed, touches ``$KCOORD_CALLGRIND_READY`` and
waits for ``<ready>.go``. Instrumentation is then switched on (`callgrind_control -i on`) and
counts are collected only inside the functions named by ``toggles`` (callgrind toggles on a
function's outermost call only), so set-up is never counted and the count is the same as
with instrumentation on from the start.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path


def count(argv: list[str], toggles: list[str], cwd: Path, tmp: str, env: dict[str, str] | None = None,
          tail: int = 2000) -> tuple[int, str]:
    """(instructions collected, the callgrind output's path in ``tmp``) of ``python argv``."""
    out = os.path.join(tmp, "callgrind.out")
    ready = Path(tmp) / "ready"
    stderr = Path(tmp) / "stderr"
    with open(stderr, "w") as err:
        child = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
             *(f"--toggle-collect={t}" for t in toggles), f"--callgrind-out-file={out}", sys.executable, *argv],
            env={**os.environ, "PYTHONHASHSEED": "0", "KCOORD_CALLGRIND_READY": str(ready), **(env or {})},
            stdout=subprocess.DEVNULL, stderr=err, cwd=cwd)
        while not ready.exists():
            if child.poll() is not None:
                raise SystemExit(f"the measured run ended before its set-up did: {stderr.read_text()}")
            time.sleep(0.2)
        subprocess.run(["callgrind_control", "--instr=on", str(child.pid)], check=True, capture_output=True)
        Path(str(ready) + ".go").touch()
        if child.wait() != 0:
            raise SystemExit(f"the measured run failed: {stderr.read_text()[-tail:]}")
    summary = re.search(r"^summary:\s+(\d+)", Path(out).read_text(), re.MULTILINE)
    if summary is None:
        raise SystemExit("callgrind wrote no summary")
    return int(summary.group(1)), out
