"""The held ListOffsets path's atheris target (fuzz/atheris_list_offsets_hold.py) on seeded inputs:
hostile first answers and retry answers through the real UpstreamLink keep the path's
invariants, and every outcome is reached (passed byte for byte, released unchanged, released
merged, still holding)."""
from __future__ import annotations

import random
from collections import Counter

# Imported before the harness, so its atheris instrumentation (a no-op for modules already
# loaded) does not slow this test down tenfold.
from coordinator.gateway import list_offsets_hold  # noqa: F401
from fuzz.atheris_list_offsets_hold import FIRST, RETRIED, VERSIONS, one

INPUTS = 3000


def test_seeded_hostile_answers_keep_the_invariants() -> None:
    rng = random.Random(1)
    outcomes: Counter[str] = Counter()
    for _ in range(INPUTS):
        mode = rng.randrange(4)
        version = rng.randrange(len(VERSIONS))
        size = rng.choice((0, 1, 3, 8, 40, 200))
        rest = bytes(rng.randrange(256) for _ in range(size))
        if mode & 2 == 0 and size >= 3 and rng.random() < 0.5:
            # a slice of a valid answer kept, so some mutations still decode
            valid = (RETRIED if mode & 1 else FIRST)[VERSIONS[version]]
            rest = rest[:2] + bytes([rng.randrange(4)]) + valid[-rng.randrange(1, 12):][:rng.randrange(4)]
        outcomes[one(bytes([version, mode]) + rest)] += 1      # raises on any broken invariant
    assert {"passed", "unchanged", "released", "holding"} <= set(outcomes), outcomes


def test_the_valid_answers_take_the_hold_and_end_holding() -> None:
    # the valid retry answers one held partition (0) and not the other (1): still holding
    assert VERSIONS[-1] == 11
    assert [one(bytes([v, 1]) + b"\x00\x00\x00") for v in range(len(VERSIONS))] == ["holding"] * len(VERSIONS)
