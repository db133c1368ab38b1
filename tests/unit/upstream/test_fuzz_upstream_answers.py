"""A short deterministic fuzz of the upstream link's answer path (fuzz/atheris_upstream_answers.py's
target): seeded scripts of requests of every API version the link serves and answers to them,
valid and hostile (unknown and duplicated correlation ids, lying sizes, extreme values,
truncation, junk), delivered in chunks cut anywhere, through the real UpstreamClient on an
in-memory transport. The harness checks the invariants itself (its docstring lists them);
this runs it on fixed seeds and checks that every outcome was reached, and that the
invariants do catch a link that breaks them.

Longer runs: `.venv/bin/python fuzz/atheris_upstream_answers.py -max_total_time=600
-rss_limit_mb=2048 -malloc_limit_mb=1024` (docs/measurements/hostile-input.md).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from coordinator.upstream import client
from coordinator.upstream.client import SIZE, UpstreamClient, UpstreamError
from fuzz.atheris_upstream_answers import KINDS, PRODUCE_V9, RandomProvider, Script, run_provider

SCRIPTS = 1500


def _outcomes(script: Script) -> Counter[str]:
    seen: Counter[str] = Counter()
    for asked in script.asked:
        future = asked.future
        if future.cancelled():
            seen["cancelled"] += 1
            continue
        error = future.exception()
        if error is None:
            seen["answered"] += 1
            seen["answered produce v9" if asked.kind == PRODUCE_V9 else "answered other"] += 1
            continue
        assert isinstance(error, UpstreamError)
        text = str(error)
        kind = next((k for k in ("does not parse", "timed out", "bytes; expected", "lost") if k in text), text)
        seen[kind] += 1
    return seen


def test_seeded_scripts_keep_the_links_invariants() -> None:
    seen: Counter[str] = Counter()
    kinds_answered = set()
    for seed in range(SCRIPTS):
        script = run_provider(RandomProvider(seed))      # raises on any broken invariant
        seen += _outcomes(script)
        seen["asked"] += len(script.asked)
        kinds_answered |= {a.kind for a in script.asked if a.future.done() and not a.future.cancelled()
                           and a.future.exception() is None}
    # Every outcome the link has was reached: answers (the Produce v9 fixed-offset read and
    # the generic path), answers that do not parse, timeouts, bad sizes, loss of the link.
    assert seen["answered produce v9"] > 100 and seen["answered other"] > 100, seen
    for outcome in ("does not parse", "timed out", "bytes; expected", "lost", "cancelled"):
        assert seen[outcome] > 50, (outcome, seen)
    assert kinds_answered == set(range(len(KINDS)))


def _answering_the_oldest(complete: Any) -> Any:
    def wrong(self: UpstreamClient, frame: bytes) -> None:
        if self._pending:
            frame = frame[:4] + SIZE.pack(min(self._pending)) + frame[8:]
        complete(self, frame)
    return wrong


def _letting_header_errors_escape(self: UpstreamClient, frame: bytes) -> None:
    """`_complete` as it was before a response header that does not decode failed the link."""
    (correlation_id,) = SIZE.unpack_from(frame, 4)
    entry = self._pending.pop(correlation_id, None)
    if entry is None or entry[0].done():
        return
    future, api_key, api_version, _, _ = entry
    try:
        future.set_result(client._decode(frame, api_key, api_version))
    except (client.BodyError, ValueError) as e:
        future.set_exception(UpstreamError(str(e)))


def _forgetting_one_pending(self: UpstreamClient, error: Exception) -> None:
    self._lost = self._lost or error
    pending, self._pending = self._pending, {}
    if self._timer is not None:
        self._timer.cancel()
        self._timer = None
    for future, *_ in list(pending.values())[1:]:
        if not future.done():
            future.set_exception(error)
    self.close()


@pytest.mark.parametrize(("attribute", "broken", "says"), [
    ("_complete", _answering_the_oldest(UpstreamClient._complete), "completed by no frame of its id"),
    ("_complete", _letting_header_errors_escape, "data_received raised HeaderError"),
    ("_fail", _forgetting_one_pending, "completed 0 times"),
], ids=["answers-another-request", "header-error-escapes", "a-pending-request-never-fails"])
def test_the_invariants_catch_a_broken_link(monkeypatch, attribute, broken, says) -> None:
    monkeypatch.setattr(UpstreamClient, attribute, broken)
    with pytest.raises(AssertionError, match=says):
        for seed in range(SCRIPTS):
            run_provider(RandomProvider(seed))
