"""The HTML report of a replay: one self-contained file with SVG plots."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ops.describe import replay_model
from ops.generator import GeneratorSpec
from ops.materialise import OffsetsReplay
from ops.report import ReportCollector, render_html

from .logs import generated_batches


def test_html_report_is_self_contained_with_well_formed_plots():
    collector = ReportCollector()
    replay = OffsetsReplay(on_record=collector.observe)
    batches = generated_batches(GeneratorSpec(records=6000, groups=12, seed=2))
    replay.feed_all(batches)
    model = replay_model(replay)
    page = render_html(model, collector)
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    assert len(svgs) == 4
    for svg in svgs:
        ET.fromstring(svg)                       # well-formed XML
    assert "<polyline" in svgs[0] and "<rect" in svgs[2]
    assert "<script" not in page and "http" not in page.replace("http://www.w3.org/2000/svg", "")
    for g in model["groups"]:
        assert g["group"] in page
    commits = sum(1 for lb in batches if not lb.batch.is_control_batch for r in lb.batch.records
                  if r.key[:2] == b"\x00\x01" and r.value is not None)
    assert sum(collector.commits_per_minute.values()) == commits > 0
