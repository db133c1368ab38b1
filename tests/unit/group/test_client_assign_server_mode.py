"""X3 (seed-drafts.md §4): a group that uses no client assignors writes exactly what it
wrote before client-side assignors existed, byte for byte, and no tag >= 1000.

`_scenario` drives a server-mode group through joins, reconciliation, a static member, a
leave, a session timeout and offset commits. GOLDEN is the SHA-256 of the state-topic log
it produced with kcoord at commit 34c902d (before issue 17's records work), computed by
running this very scenario against that tree (the docstring of `test_x3_...` says how).
"""
from __future__ import annotations

import hashlib

from coordinator.config import CoordinatorConfig
from records import decode_record

from .context import ShardContext, topic

GOLDEN = "761350b0e88d47284ab71ec06f71d1e37220359a8467971347ccff5c144df68d"


def _scenario() -> ShardContext:
    c = ShardContext(topic("foo", 6), topic("bar", 3), config=CoordinatorConfig(consumer_assignment_interval_ms=0))
    a = c.heartbeat("g", "A", 0, topics=["foo", "bar"])
    b = c.heartbeat("g", "B", 0, topics=["foo"], instance_id="i-b", rack_id="r1")
    a = c.heartbeat("g", "A", a.member_epoch, owned=c.assigned(a))
    c.advance(1_000)
    m = c.heartbeat("g", "M", 0, topics=["foo"], assignor="range")
    a = c.heartbeat("g", "A", a.member_epoch, owned={})
    b = c.heartbeat("g", "B", b.member_epoch, owned={}, instance_id="i-b")
    c.heartbeat("g", "M", m.member_epoch, owned={})
    c.heartbeat("g", "B", -2, instance_id="i-b")
    c.heartbeat("g", "A", -1)
    c.advance(50_000)                                   # M's session times out
    c.heartbeat("h", "Z", 0, topics=["bar"])
    return c


def test_x3_server_mode_log_is_byte_identical_to_before():
    """To recompute GOLDEN: `git archive 34c902d | tar -x -C /tmp/x`, copy this file into
    /tmp/x/tests/unit/group/, and print `_digest(_scenario())` from there."""
    c = _scenario()
    assert len(c.log) > 20
    assert _digest(c) == GOLDEN


def test_x3_no_private_tag_in_server_mode_records():
    for offset, key, value in _scenario().log:
        if value is None:
            continue
        r = decode_record(key, value, topic="__test", partition=0, offset=offset)
        v = r.value
        assert getattr(v, "client_assignors", ()) == ()
        assert getattr(v, "assignment_error", 0) == 0 and getattr(v, "error", 0) == 0
        assert getattr(v, "client_assignor_name", None) is None
        assert getattr(v, "metadata_version", -1) == -1 and getattr(v, "metadata_bytes", None) is None
        assert all(tag < 1000 for tag, _ in v.unknown_tagged_fields)


def _digest(c: ShardContext) -> str:
    h = hashlib.sha256()
    for offset, key, value in c.log:
        h.update(offset.to_bytes(4, "big") + key + b"|" + (value if value is not None else b"<tombstone>") + b"\n")
    return h.hexdigest()
