"""A real `kcoord serve` in front of Apache Kafka 4.4 (-Xmx512m, the worker's shared broker)
takes 100,000 structured frames (valid requests with extreme field values, every API and
version kcoord advertises there, fuzz/structured.py) and both stay whole: after every batch
kcoord and Kafka each answer ApiVersions and stay under their RSS bounds, and kcoord's log
holds no traceback. Neither run leaves an API out.
A Kafka that dies, outgrows its bound or stops answering is reported with the requests
sent just before and the seed.
"""
from __future__ import annotations

import pytest
from fuzz_structured_run import run_structured

from support.upstreams import upstream_ids

FRAMES = 100_000

pytestmark = pytest.mark.skipif("kafka44" not in upstream_ids(in_subset=False),
                                reason="KCOORD_UPSTREAMS leaves Kafka 4.4 out")


@pytest.mark.timeout(600)
def test_kcoord_and_kafka_survive_100k_structured_frames(kafka_fuzzer_for):
    fuzzer = kafka_fuzzer_for(seed=13, mode="structured", read_timeout=1.0)
    run_structured(fuzzer, FRAMES)
