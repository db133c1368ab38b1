"""What both structured live-fuzz tests run and check (in front of Tansu and of Kafka)."""
from __future__ import annotations

from fuzz.live import LiveFuzzer, LiveReport, run
from fuzz.structured import EXCLUDED


def run_structured(fuzzer: LiveFuzzer, frames: int) -> LiveReport:
    """Run `frames` structured frames and check what both structured tests assert: no
    failure (both processes answer, stay under their RSS bounds, no traceback), every frame
    sent, most of them structured, every advertised API (bar `structured.EXCLUDED`) sent,
    and answers read back. Requests on a connection are answered in order, so one the
    broker holds (a Produce waiting out its timeout) keeps the rest of its connection's
    answers past the read timeout: about one in ten is read back (8,541 of 100,000 in
    front of Kafka 4.3.1)."""
    report = run(fuzzer.run(frames, batch_frames=25_000, half_frames_per_batch=0, burst=0))
    print(report.summary())
    assert report.failures == [], "\n".join(report.failures)
    assert report.frames >= frames
    assert report.by_mutation["structured"] > frames // 2
    expected = set(fuzzer.versions) - set(EXCLUDED)
    assert set(report.by_api) >= expected, expected - set(report.by_api)
    assert report.responses > frames // 50
    return report
