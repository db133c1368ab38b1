"""The in-process atheris harnesses (fuzz/atheris_*.py) run clean for a bounded number of
inputs, with libFuzzer's memory limits on: a length bomb reaching kio's native reader (it
allocated 34 GB for a 5-byte varint) or the records reader fails this test.

One process instruments the package for all of them and each harness fuzzes in a child of
its own (atheris_runner.py): instrumenting ~700 modules cost each harness 10-20 s of its
~20 s alone, and a harness's runs are the same either way.

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


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory) -> Path:
    """Every harness run once, RUNS inputs each: the directory of their logs, exit codes and
    artifacts."""
    if not os.environ.get("CI"):   # in CI a missing atheris is a failure, never a skip
        pytest.importorskip("atheris")
    out = tmp_path_factory.mktemp("atheris")
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("atheris_runner.py")), str(out),
         *(str(REPO / "fuzz" / h) for h in HARNESSES), "--",
         f"-runs={RUNS}", "-rss_limit_mb=2048", "-malloc_limit_mb=1024", "-seed=1"],
        cwd=out, capture_output=True, text=True, timeout=560)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


@pytest.mark.timeout(600)
@pytest.mark.parametrize("harness", HARNESSES)
def test_harness_runs_clean(harness, fuzzed):
    name = Path(harness).stem
    tail = (fuzzed / f"{name}.log").read_text(errors="replace")[-4000:]
    assert (fuzzed / f"{name}.rc").read_text() == "0", f"{harness} found a crash:\n{tail}"
    assert f"Done {RUNS} runs" in tail, tail
    assert not list((fuzzed / name).glob("crash-*")) and not list((fuzzed / name).glob("oom-*"))
