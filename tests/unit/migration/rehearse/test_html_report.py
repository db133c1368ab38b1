"""The HTML report: self-contained, well-formed SVG, escaped text, conversions marked."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from migration.rehearse import analyse, render_html

from .scenario import upgrade_of_two

SVG_NS = "{http://www.w3.org/2000/svg}"


def report_html(group: str = "g") -> tuple[dict, str]:
    p, obs = upgrade_of_two()
    obs.group = group
    report = analyse(obs, p)
    return report, render_html(report)


def svg_of(page: str) -> ET.Element:
    match = re.search(r"<svg.*?</svg>", page, re.S)
    assert match, "no inline SVG"
    return ET.fromstring(match.group(0))  # raises on malformed markup


def test_page_is_self_contained() -> None:
    _, page = report_html()
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "src=" not in page and "<link" not in page


def test_timeline_has_a_lane_per_member_slot_and_marks_the_conversion() -> None:
    report, page = report_html()
    svg = svg_of(page)
    texts = [t.text for t in svg.iter(f"{SVG_NS}text")]
    assert {"group", "member m0", "member m1"} <= set(texts)
    assert "classic → consumer" in texts
    red_lines = [ln for ln in svg.iter(f"{SVG_NS}line") if ln.get("stroke") == "#cc0000"]
    assert len(red_lines) == len(report["conversions"]) == 1
    titles = [t.text or "" for t in svg.iter(f"{SVG_NS}title")]
    # Each member incarnation's bars carry its protocol and partitions in a tooltip.
    assert any(t.startswith("rehearse-m0.1 (consumer): consuming") and "[0]" in t for t in titles)
    assert any("consumer group, Stable, 2 members, group epoch 2" in t for t in titles)


def test_bars_are_coloured_by_protocol() -> None:
    _, page = report_html()
    fills = {r.get("fill") for r in svg_of(page).iter(f"{SVG_NS}rect")}
    assert {"#3465a4", "#e6760f"} <= fills  # classic blue, consumer orange


def test_text_from_the_cluster_is_escaped() -> None:
    _, page = report_html(group="<b>g&1</b>")
    assert "<b>g&1</b>" not in page and "&lt;b&gt;g&amp;1&lt;/b&gt;" in page
    svg_of(page)


def test_verdict_and_failures_are_shown() -> None:
    report, page = report_html()
    assert report["verdict"] == "fail"
    assert '<span class="verdict fail">FAIL</span>' in page
    assert "1 records produced but never consumed" in page


def test_an_aborted_run_still_renders_and_fails() -> None:
    from migration.rehearse.observations import Observations, StepLog
    from migration.rehearse.plan import rolling_schedule

    from .scenario import T0, plan

    p = plan()
    obs = Observations(plan={}, topic="t", group="g", partitions=2, t0_ns=T0, started_at="2026-01-01T00:00:00+00:00",
                       errors=["step 0 (m0 classic -> consumer): group not stable within 60.0s"])
    obs.steps = [StepLog(rolling_schedule(p)[0], t_close_requested=T0 + 10**9)]  # never settled
    report = analyse(obs, p)
    assert report["verdict"] == "fail" and report["failures"] == obs.errors
    tc = report["type_changes"]
    assert (tc["expected"], tc["observed"], tc["ok"], tc["conversions"][0]["window_s"]) == (1, 0, False, [None, None])
    page = render_html(report)
    svg_of(page)
    assert "group not stable within 60.0s" in page
