"""`kcoord rehearse`: a rolling classic <-> consumer protocol switch of a real consumer
group, with real client processes, measured and reported.

    from migration.rehearse import RehearsalPlan, rehearse, write_report
    report = rehearse(RehearsalPlan("upgrade", "127.0.0.1:9092", client="rdkafka", members=5))
    write_report(report, Path("out"))           # rehearse-upgrade-<run id>.json / .html
    report["verdict"]                           # "pass" | "fail"

The tool (migration/cli.py) and the integration tests drive this same code path.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .analysis import analyse
from .engine import run_rehearsal
from .html_report import render_html
from .plan import RehearsalPlan, Step, expected_conversions, rolling_schedule

__all__ = ["RehearsalPlan", "Step", "rolling_schedule", "expected_conversions", "run_rehearsal", "analyse",
           "render_html", "rehearse", "write_report", "summary_lines", "exit_code"]


def rehearse(plan: RehearsalPlan, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the rehearsal and return its report (see docs/user/rehearse.md for the fields)."""
    return analyse(run_rehearsal(plan, progress), plan)


def write_report(report: dict[str, Any], out_dir: Path, stem: str | None = None,
                 render: Callable[[dict[str, Any]], str] = render_html) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.html`` (by ``render``) into ``out_dir``; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = stem or f"rehearse-{report['run']['direction']}-{report['run']['run_id']}"
    json_path, html_path = out_dir / f"{stem}.json", out_dir / f"{stem}.html"
    json_path.write_text(json.dumps(report, indent=1) + "\n")
    html_path.write_text(render(report))
    return json_path, html_path


def exit_code(report: dict[str, Any]) -> int:
    """0 when nothing was lost and no committed offset went down; 1 otherwise."""
    return 0 if report["verdict"] == "pass" else 1


def summary_lines(report: dict[str, Any]) -> list[str]:
    run, rec = report["run"], report["records"]
    lines = [f"{report['verdict'].upper()}: {run['direction']}{' and back' if run['round_trip'] else ''} of "
             f"{run['members']} {run['client']} members, group {run['group']}, {run['duration_s']}s",
             f"records: {rec['produced']} produced, {rec['consumed_unique']} consumed, "
             f"{rec['duplicates']} duplicates, {rec['lost']} lost"]
    for c in report["conversions"]:
        a, b = c["observed_between_s"]
        lines.append(f"group type {c['from']} -> {c['to']} at {a}-{b}s (epoch {c['epoch_before']} -> "
                     f"{c['epoch_after']}), offset regressions: {len(c['offset_regressions'])}")
    tc = report["type_changes"]
    lines.append(f"type changes as Kafka's triggers: {'yes' if tc['ok'] else 'NO'} "
                 f"({tc['observed']} observed, {tc['expected']} expected)")
    lines += [f"FAIL: {f}" for f in report["failures"]] + [f"warning: {w}" for w in report["warnings"]]
    return lines
