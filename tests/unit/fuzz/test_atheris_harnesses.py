"""The in-process atheris harnesses (fuzz/atheris_*.py) run clean for a bounded number of
inputs, with libFuzzer's memory limits on: a length bomb reaching kio's native reader (it
allocated 34 GB for a 5-byte varint) or the records reader fails this test.

Longer runs: `.venv/bin/python fuzz/atheris_protocol.py -runs=1000000 -rss_limit_mb=2048`.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RUNS = 20_000
HARNESSES = sorted(p.name for p in (REPO / "fuzz").glob("atheris_*.py"))


def test_there_is_a_harness_for_requests_and_for_records():
    assert {"atheris_protocol.py", "atheris_records.py"} <= set(HARNESSES)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("harness", HARNESSES)
def test_harness_runs_clean(harness, tmp_path):
    if not os.environ.get("CI"):   # in CI a missing atheris is a failure, never a skip
        pytest.importorskip("atheris")
    proc = subprocess.run(
        [sys.executable, str(REPO / "fuzz" / harness), f"-runs={RUNS}", "-rss_limit_mb=2048",
         "-malloc_limit_mb=1024", "-seed=1", f"-artifact_prefix={tmp_path}/"],
        cwd=tmp_path, capture_output=True, text=True, timeout=280)
    tail = proc.stderr[-4000:]
    assert proc.returncode == 0, f"{harness} found a crash:\n{tail}"
    assert f"Done {RUNS} runs" in proc.stderr, tail
    assert not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("oom-*"))
