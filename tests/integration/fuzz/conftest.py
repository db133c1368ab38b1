"""One fuzz target per test: a `kcoord serve` of its own in front of a Tansu of its own,
the Tansu under an address-space cap (a broker that tries to take the machine's memory
aborts instead) and watched during the run (fuzz/health.py)."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from fuzz.health import UpstreamWatch, cap_address_space
from fuzz.live import FUZZ_CONFIG, LiveFuzzer
from support.kcoord import FAST, KcoordProcess

RSS_LIMIT_MB = 400          # kcoord idles at ~70 MB; the fuzz run's groups and members add some
TANSU_RSS_LIMIT_MB = 1024   # Tansu idles at 30 MB; it keeps the run's few records and topics
TANSU_CAP = 2 * 1024**3


@pytest.fixture
def fuzzer_for(fresh_tansu, names) -> Iterator[Callable[..., LiveFuzzer]]:
    """``fuzzer_for(seed=…, mode=…)``: a LiveFuzzer aimed at a fresh kcoord and Tansu."""
    state_topic = names.topic("fuzz-state")
    kcoord = KcoordProcess(fresh_tansu.bootstrap, state_topic, state_partitions=4,
                           config=FAST + FUZZ_CONFIG).start()
    cap_address_space(fresh_tansu.process.pid, TANSU_CAP)

    def make(**options) -> LiveFuzzer:
        host, port = kcoord.bootstrap.split(":")
        tansu = UpstreamWatch("Tansu", fresh_tansu.host, fresh_tansu.port, fresh_tansu.process.pid,
                              rss_limit_mb=TANSU_RSS_LIMIT_MB)
        return LiveFuzzer(host, int(port), kcoord.process.pid, kcoord.log_path, state_topic=state_topic,
                          rss_limit_mb=RSS_LIMIT_MB, upstream=tansu, **options)
    try:
        yield make
        assert kcoord.process.poll() is None, "kcoord exited during the run"
        assert fresh_tansu.is_running(), "Tansu exited during the run"
    finally:
        kcoord.stop()
