"""`kcoord rehearse streams`: a real Kafka Streams application moved offline classic -> streams
-> classic (KIP-1071), measured and reported (docs/user/rehearse.md, "Streams").

    from migration.rehearse.streams import StreamsRehearsalPlan, rehearse_streams, write_streams_report
    report = rehearse_streams(StreamsRehearsalPlan("127.0.0.1:9092", instances=3))
    write_streams_report(report, Path("out"))   # rehearse-streams-<run id>.json / .html
    report["verdict"]                           # "pass" | "fail"

The tool (migration/cli.py) and the integration test drive this same code path.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import write_report
from .streams_analysis import analyse_streams
from .streams_engine import run_streams_rehearsal
from .streams_html import render_streams_html
from .streams_plan import StreamsRehearsalPlan

__all__ = ["StreamsRehearsalPlan", "rehearse_streams", "write_streams_report", "streams_summary_lines"]


def rehearse_streams(plan: StreamsRehearsalPlan, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the Streams rehearsal and return its report."""
    return analyse_streams(run_streams_rehearsal(plan, progress), plan)


def write_streams_report(report: dict[str, Any], out_dir: Path, stem: str | None = None) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.html`` into ``out_dir``; returns both paths."""
    return write_report(report, out_dir, stem or f"rehearse-streams-{report['run']['run_id']}", render_streams_html)


def streams_summary_lines(report: dict[str, Any]) -> list[str]:
    run, inp, counts = report["run"], report["input"], report["counts"]
    lines = [f"{report['verdict'].upper()}: streams rehearsal {' -> '.join(run['phases'])} of {run['instances']} "
             f"instances ({run.get('guarantee', 'at_least_once')}, stop by {run['stop']}), group {run['group']}, "
             f"{run['duration_s']}s",
             f"input: {inp['produced']} produced, {inp['processed_unique']} processed, "
             f"{inp['never_processed']} never processed, {inp['processed_twice_in_a_phase']} twice in a phase",
             f"counts: {'complete and correct' if counts['ok'] else 'WRONG'} ({counts['words']} words, "
             f"{counts['expected_total']} records)"]
    for p in report["phases"]:
        lines.append(f"phase {p['phase']} {p['protocol']}: group {'/'.join(p['group_types_while_running']) or '?'} "
                     f"settled in {p['settle_s']}s, Empty at {p['empty_s']}s: {'ok' if p['ok'] else 'NOT OK'}")
    tc = report["type_changes"]
    lines.append(f"type changes as Kafka's offline conversions: {'yes' if tc['ok'] else 'NO'} "
                 f"({len(tc['observed'])} observed, {len(tc['expected'])} expected); "
                 f"tasks active twice: {len(report['active_twice'])}")
    lines += [f"FAIL: {f}" for f in report["failures"]] + [f"warning: {w}" for w in report["warnings"]]
    return lines
