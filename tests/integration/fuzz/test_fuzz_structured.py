"""A real `kcoord serve` in front of a real Tansu of its own takes 100,000 structured
frames (valid requests with extreme field values, every advertised API and version,
fuzz/structured.py) and both stay whole: after every batch kcoord and Tansu each answer
ApiVersions, stay under their RSS bounds, and kcoord's log holds no traceback. A Tansu
that dies is reported as a finding with the requests it was handling and the seed.
"""
from __future__ import annotations

import pytest

from fuzz.health import UpstreamWatch, cap_address_space
from fuzz.live import FUZZ_CONFIG, LiveFuzzer, run
from fuzz.structured import EXCLUDED
from support.kcoord import FAST, KcoordProcess

FRAMES = 100_000
RSS_LIMIT_MB = 400          # kcoord idles at ~70 MB; the same bound as the byte-mutation run
TANSU_RSS_LIMIT_MB = 1024   # Tansu idles at 30 MB; it keeps the run's few records and topics
TANSU_CAP = 2 * 1024**3     # address space: a Tansu that tries to take the machine aborts instead


@pytest.mark.timeout(600)
def test_kcoord_and_tansu_survive_100k_structured_frames(fresh_tansu, names):
    state_topic = names.topic("fuzz-state")
    kcoord = KcoordProcess(fresh_tansu.bootstrap, state_topic, state_partitions=4,
                           config=FAST + FUZZ_CONFIG).start()
    try:
        cap_address_space(fresh_tansu.process.pid, TANSU_CAP)
        host, port = kcoord.bootstrap.split(":")
        tansu = UpstreamWatch("Tansu", fresh_tansu.host, fresh_tansu.port, fresh_tansu.process.pid,
                              rss_limit_mb=TANSU_RSS_LIMIT_MB)
        fuzzer = LiveFuzzer(host, int(port), kcoord.process.pid, kcoord.log_path, state_topic=state_topic,
                            rss_limit_mb=RSS_LIMIT_MB, seed=11, mode="structured", upstream=tansu,
                            read_timeout=1.0)
        report = run(fuzzer.run(FRAMES, batch_frames=25_000, half_frames_per_batch=0, burst=0))
        print(report.summary())
        assert report.failures == [], "\n".join(report.failures)
        assert report.frames >= FRAMES
        assert report.by_mutation["structured"] > FRAMES // 2
        # every advertised API was sent, the group APIs kcoord serves and the ones it forwards
        assert set(report.by_api) >= set(fuzzer.versions) - set(EXCLUDED), set(fuzzer.versions) - set(report.by_api)
        assert report.responses > FRAMES // 2
        assert kcoord.process.poll() is None and fresh_tansu.is_running()
    finally:
        kcoord.stop()
