"""A real `kcoord serve`, over a real Tansu of its own, takes 100,000 fuzzed frames and
stays whole: after every batch it answers ApiVersions within 2 s, its RSS stays under
RSS_LIMIT_MB, its log holds no traceback, and Tansu too answers and stays under its bound;
half frames followed by silence are closed after connections.max.idle.ms. The mutation
classes and the table of APIs are fuzz/; the
1,000,000-frame run with its rate is bench/bench_fuzz.py.
"""
from __future__ import annotations

import pytest

from fuzz.health import UpstreamWatch, cap_address_space
from fuzz.live import FUZZ_CONFIG, IDLE_MS, LiveFuzzer, run
from support.kcoord import FAST, KcoordProcess

FRAMES = 100_000
RSS_LIMIT_MB = 400      # kcoord idles at ~70 MB; the fuzz run's groups and members add some
TANSU_RSS_LIMIT_MB = 1024   # Tansu idles at 30 MB
TANSU_CAP = 2 * 1024**3     # address space: a Tansu that tries to take the machine aborts instead


@pytest.mark.timeout(900)
def test_kcoord_survives_100k_fuzzed_frames(fresh_tansu, names):
    state_topic = names.topic("fuzz-state")
    kcoord = KcoordProcess(fresh_tansu.bootstrap, state_topic, state_partitions=4,
                           config=FAST + FUZZ_CONFIG).start()
    try:
        cap_address_space(fresh_tansu.process.pid, TANSU_CAP)
        host, port = kcoord.bootstrap.split(":")
        tansu = UpstreamWatch("Tansu", fresh_tansu.host, fresh_tansu.port, fresh_tansu.process.pid,
                              rss_limit_mb=TANSU_RSS_LIMIT_MB)
        fuzzer = LiveFuzzer(host, int(port), kcoord.process.pid, kcoord.log_path, state_topic=state_topic,
                            rss_limit_mb=RSS_LIMIT_MB, seed=7, upstream=tansu)
        report = run(fuzzer.run(FRAMES, batch_frames=20_000, idle_ms=IDLE_MS))
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
