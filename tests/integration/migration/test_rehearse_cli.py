"""`kcoord rehearse` as an operator runs it: a separate process, reports on disk, exit code."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(90)
def test_cli_downgrade_of_two_rdkafka_members_writes_both_reports_and_exits_zero(gateway, names, tmp_path) -> None:
    cmd = [sys.executable, "-m", "coordinator.cli", "rehearse", "downgrade", "--bootstrap", gateway.bootstrap,
           "--members", "2", "--topic", names.topic(), "--group", names.group(), "--rate", "30",
           "--warmup", "1", "--dwell", "0.5", "--settle-timeout", "30", "--out", str(tmp_path), "--name", "run"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=80)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-3000:]}"
    report = json.loads((tmp_path / "run.json").read_text())
    page = (tmp_path / "run.html").read_text()
    assert proc.stdout.startswith("PASS: downgrade of 2 rdkafka members")
    assert f"report: {tmp_path / 'run.json'} {tmp_path / 'run.html'}" in proc.stdout
    assert report["verdict"] == "pass" and report["records"]["lost"] == 0 and report["records"]["produced"] > 0
    # consumer -> classic when the last consumer-protocol member (m1) leaves, during the last step.
    [c] = report["conversions"]
    assert (c["from"], c["to"], c["during_step"]) == ("consumer", "classic", 1)
    assert report["type_changes"]["ok"]
    assert "<svg" in page and "consumer → classic" in page
