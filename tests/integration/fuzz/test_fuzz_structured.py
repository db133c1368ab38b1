"""A real `kcoord serve` in front of a real Tansu of its own takes 100,000 structured
frames (valid requests with extreme field values, every advertised API and version,
fuzz/structured.py) and both stay whole: after every batch kcoord and Tansu each answer
ApiVersions, stay under their RSS bounds, and kcoord's log holds no traceback. A Tansu
that dies, outgrows its bound or stops answering is reported as a finding with the
requests sent just before and the seed. ``KCOORD_FUZZ_SEED`` runs another seed (the
default is the one CI runs).
"""
from __future__ import annotations

import os

import pytest
from fuzz_structured_run import run_structured

FRAMES = 100_000
SEED = int(os.environ.get("KCOORD_FUZZ_SEED", "11"))


@pytest.mark.timeout(600)
def test_kcoord_and_tansu_survive_100k_structured_frames(fuzzer_for):
    fuzzer = fuzzer_for(seed=SEED, mode="structured", read_timeout=1.0)
    # every advertised API is sent, DeleteTopics with CreateTopics included (fuzz/README.md's
    # stale-view finding)
    run_structured(fuzzer, FRAMES)
