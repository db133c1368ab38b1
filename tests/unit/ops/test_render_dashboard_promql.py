"""The PromQL subset of ops/deploy/promql.py against values computed by hand from
Prometheus's documented rules (extrapolation, counter resets, bucket interpolation,
staleness), and its refusals of what it does not support."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ops.deploy.promql import Store, Unsupported, evaluate, legend, parse, quantile

DASHBOARD = Path(__file__).resolve().parents[3] / "ops" / "deploy" / "grafana" / "dashboards" / "kcoord.json"


def store(points: dict[float, dict[tuple[tuple[str, str], ...], float]]) -> Store:
    s = Store()
    for t in sorted(points):
        s.add_scrape(t, [(dict(labels), v) for labels, v in points[t].items()])
    return s


def counter(name: str, samples: dict[float, float], **labels: str) -> Store:
    key = (("__name__", name), *sorted(labels.items()))
    return store({t: {key: v} for t, v in samples.items()})


def q(query: str, s: Store, t: float):
    return evaluate(parse(query), s, t)


def test_rate_of_a_counter_from_zero_is_not_extrapolated_below_zero():
    # 0..40 over 40 s; the window (−20, 40] starts 20 s before the first sample, but a
    # counter at 0 cannot have been lower: no extrapolation at the start. 40 / 60 s.
    s = counter("c_total", {0: 0, 10: 10, 20: 20, 30: 30, 40: 40})
    assert q("rate(c_total[1m])", s, 40) == {(): pytest.approx(40 / 60)}


def test_rate_extrapolates_half_an_interval_when_the_window_starts_long_before():
    # Window (65, 125]: samples at 100, 110, 120 (50, 60, 70). Start gap 35 s > 1.1 × 10 s:
    # extend by 5 s; end gap 5 s < 11 s: extend to the end. 20 × 30/20 = 30 over 60 s.
    s = counter("c_total", {100: 50, 110: 60, 120: 70})
    assert q("increase(c_total[1m])", s, 125) == {(): pytest.approx(30)}
    assert q("rate(c_total[1m])", s, 125) == {(): pytest.approx(0.5)}


def test_counter_reset_is_corrected():
    # (10, 40]: 110, 5, 15 at 20, 30, 40: 15 − 110 + 110 = 15; start gap 10 s < 11 s: to the
    # start, 15 × 30/20 = 22.5.
    s = counter("c_total", {10: 100, 20: 110, 30: 5, 40: 15})
    assert q("increase(c_total[30s])", s, 40) == {(): pytest.approx(22.5)}
    assert q("rate(c_total[30s])", s, 40) == {(): pytest.approx(0.75)}
    assert q("irate(c_total[30s])", s, 40) == {(): pytest.approx(1.0)}    # (15 − 5) / 10
    assert q("irate(c_total[30s])", s, 30) == {(): pytest.approx(0.5)}    # reset: 5 / 10


def test_one_sample_in_the_window_gives_no_rate():
    s = counter("c_total", {0: 1, 100: 2})
    assert q("rate(c_total[1m])", s, 100) == {}


def test_histogram_quantile_interpolates_inside_the_bucket():
    buckets = [(0.1, 10), (0.5, 30), (1.0, 40), (math.inf, 40)]
    assert quantile(0.5, buckets) == pytest.approx(0.3)       # rank 20: 0.1 + 0.4 × 10/20
    assert quantile(0.99, buckets) == pytest.approx(0.98)     # rank 39.6: 0.5 + 0.5 × 9.6/10
    assert quantile(0.05, buckets) == pytest.approx(0.02)     # rank 2: 0.1 × 2/10
    assert quantile(0.99, [(0.1, 10), (0.5, 30), (1.0, 40), (math.inf, 50)]) == 1.0   # +Inf: lower bound
    assert math.isnan(quantile(0.5, [(0.1, 0), (math.inf, 0)]))
    assert math.isnan(quantile(0.5, [(0.1, 3), (1.0, 5)]))    # no +Inf bucket


def test_histogram_quantile_over_rates_of_bucket_counters():
    # Per le, the buckets grow by 10, 30, 40, 40 over the window: the same shape as above.
    points = {}
    for t, k in ((0, 0), (10, 1), (20, 2)):
        points[t] = {(("__name__", "h_bucket"), ("api", "x"), ("le", le)): n * k
                     for le, n in (("0.1", 5), ("0.5", 15), ("1.0", 20), ("+Inf", 20))}
    s = store(points)
    (value,) = q('histogram_quantile(0.5, sum by (le) (rate(h_bucket{api="x"}[1m])))', s, 20).values()
    assert value == pytest.approx(0.3)


def test_aggregations_matchers_and_arithmetic():
    g = "kcoord_groups"
    s = store({0: {(("__name__", g), ("state", "x"), ("type", "a")): 1,
                   (("__name__", g), ("state", "y"), ("type", "a")): 2,
                   (("__name__", g), ("state", "x"), ("type", "b")): 5}})
    assert q(f"sum by (type) ({g})", s, 0) == {(("type", "a"),): 3, (("type", "b"),): 5}
    assert q(f"sum({g}) by (type)", s, 0) == q(f"sum without (state) ({g})", s, 0)
    assert q(f"max by (state) ({g})", s, 0) == {(("state", "x"),): 5, (("state", "y"),): 2}
    assert q(f"min({g})", s, 0) == {(): 1} and q(f"count({g})", s, 0) == {(): 3}
    assert q(f"avg by (state) ({g})", s, 0)[(("state", "x"),)] == 3
    assert q(f'sum({g}{{type!="a"}})', s, 0) == {(): 5}
    assert q(f'sum({g}{{state=~"x|z"}})', s, 0) == {(): 6}
    assert q(f'sum({g}{{type=~"a."}})', s, 0) == {}                 # anchored: "a." needs two characters
    assert q(f'sum({g}{{state!~"x"}})', s, 0) == {(): 2}
    assert q(f"sum by (type) ({g}) * 60", s, 0) == {(("type", "a"),): 180, (("type", "b"),): 300}
    assert q(f'{g}{{type="b"}} / 2', s, 0) == {(("state", "x"), ("type", "b")): 2.5}   # the name is dropped
    assert q("2 + 3 * 4", s, 0) == 14


def test_a_series_missing_from_the_latest_scrape_is_stale():
    key = (("__name__", "up"),)
    s = store({0: {key: 1}, 10: {}, 20: {key: 0}})
    assert q("up", s, 5) == {key: 1}
    assert q("up", s, 10) == {} and q("up", s, 15) == {}
    assert q("up", s, 20) == {key: 0}
    assert q("up", s, -1) == {}


@pytest.mark.parametrize("query,says", [
    ("topk(3, kcoord_groups)", "topk"),
    ("kcoord_groups offset 5m", "offset"),
    ("rate(kcoord_groups[5m:1m])", "subqueries"),
    ("kcoord_groups > 3", "'>'"),
    ("a / b", "between two vectors"),
    ("rate(kcoord_groups)", "range selector"),
    ("kcoord_groups[5m]", "range selector"),
    ("sum by (x) (a) by (y)", "two groupings"),
    ("kcoord_groups{a~\"b\"}", "~"),
])
def test_unsupported_queries_are_refused_naming_the_construct(query, says):
    with pytest.raises(Unsupported, match=None) as e:
        evaluate(parse(query), Store(), 0)
    assert says in str(e.value)


def test_every_dashboard_query_is_in_the_subset():
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            parse(target["expr"])


def test_legend_format():
    labels = (("listener", "bootstrap"), ("direction", "to_client"))
    assert legend("{{listener}} {{ direction }}", labels) == "bootstrap to_client"
    assert legend("{{missing}}", labels) == '{listener="bootstrap", direction="to_client"}'
