"""The Produce guard's atheris target (fuzz/atheris_produce_guard.py) on seeded inputs: a
Produce above max_decoded_request_bytes is answered exactly as the same frame walked at once,
or refused, or closed where walked at once it would be decoded, with the record checks on and
off; every outcome is reached."""
from __future__ import annotations

import random
from collections import Counter

# Imported before the harness, so its atheris instrumentation (a no-op for modules already
# loaded) does not slow this test down.
from coordinator.gateway import state_guard  # noqa: F401
from fuzz.atheris_produce_guard import one

INPUTS = 3000


def test_seeded_produces_keep_the_invariants() -> None:
    rng = random.Random(1)
    outcomes: Counter[str] = Counter()
    for _ in range(INPUTS):
        data = bytes(rng.randrange(256) for _ in range(rng.choice((4, 16, 40, 120))))
        outcomes[one(data)] += 1          # raises on any broken invariant
    assert {"forwarded", "too large", "refused", "closed"} <= set(outcomes), outcomes
