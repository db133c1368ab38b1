"""A real `kcoord serve`, over a real Tansu of its own, takes 100,000 fuzzed frames and
stays whole: after every batch it answers ApiVersions within 2 s, its RSS stays under its
bound, its log holds no traceback, and Tansu too answers and stays under its bound; half
frames followed by silence are closed after connections.max.idle.ms. The mutation classes
and the table of APIs are fuzz/; the 1,000,000-frame run with its rate is
bench/bench_fuzz.py.
"""
from __future__ import annotations

import pytest

from fuzz.live import IDLE_MS, run

FRAMES = 100_000


@pytest.mark.timeout(900)
def test_kcoord_survives_100k_fuzzed_frames(fuzzer_for):
    report = run(fuzzer_for(seed=7).run(FRAMES, batch_frames=20_000, idle_ms=IDLE_MS))
    print(report.summary())
    assert report.failures == [], "\n".join(report.failures)
    assert report.frames >= FRAMES
    # every mutation class and every table row was exercised
    assert report.mutated > FRAMES // 10
    assert all(report.by_mutation[name] > 0 for name in ("length_bomb", "truncate", "null_field",
                                                         "bad_varint", "wrong_version", "lying_size"))
    assert report.half_frames_closed == report.half_frames > 0
