"""A real `kcoord serve`, over a real Tansu of its own, takes 100,000 fuzzed frames and
stays whole: after every batch it answers ApiVersions within 2 s, its RSS stays under
RSS_LIMIT_MB, its log holds no traceback; half frames followed by silence are closed after
connections.max.idle.ms. The mutation classes and the table of APIs are fuzz/; the
1,000,000-frame run with its rate is bench/bench_fuzz.py.
"""
from __future__ import annotations

import asyncio

import pytest

from fuzz.live import FUZZ_CONFIG, IDLE_MS, LiveFuzzer
from support.kcoord import FAST, KcoordProcess

FRAMES = 100_000
RSS_LIMIT_MB = 400      # kcoord idles at ~70 MB; the fuzz run's groups and members add some


@pytest.mark.timeout(900)
def test_kcoord_survives_100k_fuzzed_frames(fresh_tansu, names):
    state_topic = names.topic("fuzz-state")
    kcoord = KcoordProcess(fresh_tansu.bootstrap, state_topic, state_partitions=4,
                           config=FAST + FUZZ_CONFIG).start()
    try:
        host, port = kcoord.bootstrap.split(":")
        fuzzer = LiveFuzzer(host, int(port), kcoord.process.pid, kcoord.log_path, state_topic=state_topic,
                            rss_limit_mb=RSS_LIMIT_MB, seed=7)
        report = asyncio.run(fuzzer.run(FRAMES, batch_frames=20_000, idle_ms=IDLE_MS))
        print(report.summary())
        assert report.failures == [], "\n".join(report.failures)
        assert report.frames >= FRAMES
        # every mutation class and every table row was exercised
        assert report.mutated > FRAMES // 10
        assert all(report.by_mutation[name] > 0 for name in ("length_bomb", "truncate", "null_field",
                                                             "bad_varint", "wrong_version", "lying_size"))
        assert report.half_frames_closed == report.half_frames > 0
        assert kcoord.process.poll() is None
    finally:
        kcoord.stop()
