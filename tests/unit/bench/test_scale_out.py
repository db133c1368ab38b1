"""bench/bench_scale_out.py's and the side-by-side report's pieces that can be wrong
silently: each kcoord process's CPU per operation (its own CPU over its own port's
responses; a lone process answers at whatever port FindCoordinator named), the scale-out
ratios, and an upstream that does not serve a workload's API named in its table cell."""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

import bench_scale_out as so  # noqa: E402
from side_by_side import report  # noqa: E402
from side_by_side.load import LoadResult  # noqa: E402


def instance(port: int, pid: int) -> SimpleNamespace:
    return SimpleNamespace(port=port, process=SimpleNamespace(pid=pid))


def result(responses: int, by_pid: dict[int, float], by_port: dict[int, int]) -> LoadResult:
    return LoadResult(rate=responses / 4.0, responses=responses, errors={}, p50_us=800.0, p99_us=9000.0,
                      server_cpu_s=sum(by_pid.values()), generator_cpu_s=0.4, window_s=4.0,
                      server_cpu_by_pid=by_pid, responses_by_port=by_port)


def test_each_process_cpu_per_op_is_its_cpu_over_its_own_responses():
    two = so.Setup("two", 10, 9092, [instance(7000, 11), instance(7002, 12)], {0}, {1})
    f = so.figures(two, result(40_000, {10: 0.8, 11: 1.2, 12: 2.0}, {7000: 10_000, 7002: 30_000}))
    assert f["kcoord_us_per_op_each"] == pytest.approx([120.0, 2.0 / 30_000 * 1e6])
    assert f["kcoord_us_per_op"] == pytest.approx(80.0) and f["broker_us_per_op"] == pytest.approx(20.0)
    assert f["kcoord_cores"] == pytest.approx([0.3, 0.5]) and f["responses_each"] == [10_000, 30_000]
    # a plain serve names its broker listener (P+1) as the coordinator: all its responses count
    plain = so.Setup("plain", 10, 9092, [instance(7000, 11)], {0}, {1})
    f = so.figures(plain, result(8_000, {10: 0.2, 11: 0.8}, {7001: 8_000}))
    assert f["kcoord_us_per_op_each"] == pytest.approx([100.0]) and f["responses_each"] == [8_000]


def test_layouts_put_only_the_second_kcoord_between_one_ab_and_two():
    a, b = {0}, {1}
    one_ab = so.Setup("one_ab", 10, 9092, [instance(7000, 11)], a, b)
    two = so.Setup("two", 10, 9092, [instance(7000, 11), instance(7002, 12)], a, b)
    one = so.Setup("one", 10, 9092, [instance(7000, 11)], a, b)
    assert (one_ab.broker_cpus, one_ab.load_cpus) == (two.broker_cpus, two.load_cpus) == ({0, 1}, {0, 1})
    assert one_ab.kcoord_cpus == [a] and two.kcoord_cpus == [a, b]
    assert (one.kcoord_cpus, one.broker_cpus, one.load_cpus) == ([a], b, b)
    assert so.Setup("kafka1", 10, 9092, [], a, b).ports == [9092]


def test_scaling_lines_give_measured_and_cpu_ratios():
    def run(rate: float, us: float | None = None) -> dict[str, float]:
        return {"rate": rate, **({"kcoord_us_per_op": us} if us else {})}

    per = {"kafka1": [run(10_000), run(12_000), None], "kafka2": [run(20_000)] * 3,
           "one_ab": [run(8_000, 100.0), run(9_000, 110.0), run(7_000, 90.0)],
           "two": [run(16_000, 100.0), run(17_000, 100.0), run(18_000, 100.0)]}
    lines = so.scaling(per)
    assert lines[0].startswith("- Kafka's coordinator, 2 cores / 1 core: **1.82×**")     # 20,000 / 11,000
    (ab,) = [line for line in lines if "`one_ab`" in line]
    assert "measured **2.12×**" in ab                                                    # 17,000 / 8,000
    assert "serve **2.00×** one's CPU-bound rate" in ab                                  # 2 × 100 / 100


def test_an_upstream_without_the_api_is_named_in_its_cell():
    results = {"meta": {"args": {"commit_connections": 100, "pipeline_connections": 8, "pipeline_depth": 16,
                                 "members": 1000},
                        "config_titles": {"tansu": "Tansu"},
                        "side_titles": {"tansu": {"kafka": "Tansu alone", "kcoord": "kcoord in front of Tansu"}},
                        "not_served": {"tansu": {"heartbeat_closed": "not served: no API 68"}}},
               "figures": {"tansu": {"heartbeat_closed": {"kcoord": [{"cpu_us_per_op": 30.0, "rate": 9000.0}]}}}}
    lines = report.tables(results).splitlines()
    assert lines[2] == "| workload | Tansu alone | kcoord in front of Tansu | CPU, kcoord side / upstream alone |"
    row = next(line for line in lines if line.startswith("| steady ConsumerGroupHeartbeat"))
    upstream, kcoord, ratio = row.strip("| ").split(" | ")[1:]
    assert upstream == "not served: no API 68" and kcoord.startswith("**30 µs**") and ratio == "—"
