"""The pure pieces of the issue 14 cluster benchmarks (bench/bench_failover.py,
bench_cluster_rebalance.py, bench_cluster_heartbeat.py) that would be wrong silently: when a
group counts as formed, how the broker's and kcoord's log lines are timed, the kcoord
command line, and the scripts' argument parsing."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


members = _load("bench_cluster_members", BENCH / "cluster" / "members.py")
common = _load("bench_cluster_common", BENCH / "cluster" / "common.py")


def test_formed_at_is_the_first_moment_of_a_complete_disjoint_balanced_assignment_that_lasts():
    names = ["a", "b"]
    events = [
        (10, "a", "assigned", frozenset({0, 1, 2, 3})),     # complete, but a holds everything
        (20, "a", "revoked", frozenset({2, 3})),
        (30, "b", "assigned", frozenset({2, 3})),            # balanced from here
    ]
    assert members.formed_at(events, names, 4) == 30
    # Broken again later: not formed at the end.
    assert members.formed_at([*events, (40, "b", "revoked", frozenset({3}))], names, 4) is None
    # An overlap (both hold 3) is not disjoint.
    assert members.formed_at([*events, (40, "a", "assigned", frozenset({3}))], names, 4) is None


def test_kafka_log_lines_are_read_as_local_time():
    line = ("[2026-11-25 18:37:20,123] INFO [GroupCoordinator id=1] Preparing to rebalance group "
            "kcoord.__kc_x in state PreparingRebalance (kafka.coordinator)")
    path = Path(common.tempfile.mkdtemp()) / "server.log"
    path.write_text("noise\n" + line + "\n[2026-11-25 18:37:21,000] INFO other group\n")
    (t, text), = common.kafka_log(path, "kcoord.__kc_x")
    assert text.startswith("[GroupCoordinator id=1] Preparing to rebalance")
    assert t == time.mktime((2026, 11, 25, 18, 37, 20, 0, 0, -1)) + 0.123


def test_kcoord_json_log_lines_carry_utc_timestamps():
    path = Path(common.tempfile.mkdtemp()) / "kcoord.log"
    path.write_text('{"time":"2026-11-25T18:37:20.500+00:00","level":"INFO","logger":"kcoord","message":"hi"}\n'
                    "Traceback (not json)\n")
    assert common.kcoord_log(path) == [(1795631840.5, "hi")]


def test_the_log_format_goes_before_the_serve_subcommand():
    p = common.JsonKcoord("127.0.0.1:9092", "__kc", config=common.cluster_config(2000, fencing="none"),
                          extra_args=("--instance-id", "kc-0"), port=29500)
    args = p.serve_args()
    at = args.index("coordinator.cli")
    assert args[at + 1:at + 6] == ["--log-format", "json", "--log-level", "INFO", "serve"]
    config = [args[i + 1] for i, a in enumerate(args) if a == "--config"]
    assert "cluster.session.timeout.ms=2000" in config and "cluster.heartbeat.interval.ms=200" in config
    assert "fencing=none" in config
    assert args[-2:] == ["--instance-id", "kc-0"]


def test_the_scripts_parse_their_arguments():
    for script in ("bench_failover.py", "bench_cluster_rebalance.py", "bench_cluster_heartbeat.py"):
        out = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        assert "usage:" in out.stdout
