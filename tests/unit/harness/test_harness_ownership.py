"""OwnershipLedger: interval bookkeeping and the double-ownership check."""
from __future__ import annotations

import threading

import pytest

from support.consumer_events import ConsumedRecord, ConsumerEventLog
from support.ownership import OwnershipLedger

T0 = ("t", 0)
T1 = ("t", 1)


def test_clean_handover_is_not_a_violation() -> None:
    ledger = OwnershipLedger()
    ledger.record(100, "a", "assigned", [T0, T1])
    ledger.record(200, "a", "revoked", [T1])
    ledger.record(200, "b", "assigned", [T1])  # half-open intervals: touching is not overlapping
    assert ledger.violations() == []
    assert ledger.current_assignment() == {"a": frozenset({T0}), "b": frozenset({T1})}
    ledger.assert_no_double_ownership(allow_anomalies=False)


def test_overlap_is_reported_with_members_and_window() -> None:
    ledger = OwnershipLedger()
    ledger.record(1_000_000_000, "a", "assigned", [T0])
    ledger.record(1_500_000_000, "b", "assigned", [T0])
    ledger.record(1_750_000_000, "a", "revoked", [T0])
    [v] = ledger.violations()
    assert v.tp == T0
    assert (v.first.member, v.second.member) == ("a", "b")
    assert (v.overlap_start_ns, v.overlap_end_ns) == (1_500_000_000, 1_750_000_000)
    text = v.describe(origin_ns=1_000_000_000)
    assert "t-0 owned twice" in text and "250.0 ms" in text and "+0.500s" in text
    with pytest.raises(AssertionError, match="owned twice"):
        ledger.assert_no_double_ownership()


def test_two_open_intervals_overlap_still_open() -> None:
    ledger = OwnershipLedger()
    ledger.record(10, "a", "assigned", [T0])
    ledger.record(20, "b", "assigned", [T0])
    [v] = ledger.violations()
    assert v.overlap_end_ns is None and "still open" in v.describe()


def test_events_from_many_sources_are_ordered_by_timestamp_not_arrival() -> None:
    ledger = OwnershipLedger()
    # b's assignment arrives first but happened after a's revocation.
    ledger.record(300, "b", "assigned", [T0])
    ledger.record(100, "a", "assigned", [T0])
    ledger.record(250, "a", "revoked", [T0])
    assert ledger.violations() == []
    assert ledger.owners_at(200) == {T0: frozenset({"a"})}
    assert ledger.owners_at(300) == {T0: frozenset({"b"})}


def test_lost_and_gone_end_ownership() -> None:
    ledger = OwnershipLedger()
    ledger.record(10, "a", "assigned", [T0, T1])
    ledger.record(20, "a", "lost", [T0])
    ledger.member_gone(30, "a")
    ledger.record(30, "b", "assigned", [T0, T1])
    assert ledger.violations() == []
    ends = {tp: [(iv.member, iv.end_event) for iv in ivs] for tp, ivs in ledger.intervals().items()}
    assert ends == {T0: [("a", "lost"), ("b", None)], T1: [("a", "gone"), ("b", None)]}


def test_same_member_reassigned_after_revoke_is_fine_but_double_assign_is_an_anomaly() -> None:
    ledger = OwnershipLedger()
    ledger.record(10, "a", "assigned", [T0])
    ledger.record(20, "a", "revoked", [T0])
    ledger.record(30, "a", "assigned", [T0])
    ledger.record(40, "a", "assigned", [T0])
    ledger.record(50, "a", "revoked", [T1])
    assert ledger.violations() == []
    assert [a.what for a in ledger.anomalies()] == ["assigned while already owned", "revoked but not owned"]
    ledger.assert_no_double_ownership()  # anomalies allowed by default
    with pytest.raises(AssertionError, match="anomaly"):
        ledger.assert_no_double_ownership(allow_anomalies=False)


def test_three_way_overlap_reports_every_pair() -> None:
    ledger = OwnershipLedger()
    for t, m in ((10, "a"), (20, "b"), (30, "c")):
        ledger.record(t, m, "assigned", [T0])
    pairs = {(v.first.member, v.second.member) for v in ledger.violations()}
    assert pairs == {("a", "b"), ("a", "c"), ("b", "c")}


def test_unknown_event_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown ownership event 'stolen'"):
        OwnershipLedger().record(1, "a", "stolen", [T0])


def test_records_outside_ownership() -> None:
    ledger = OwnershipLedger()
    ledger.record(10, "a", "assigned", [T0])
    ledger.record(20, "a", "revoked", [T0])
    inside = ConsumedRecord("a", "t", 0, 5, "v5", 15)
    after = ConsumedRecord("a", "t", 0, 6, "v6", 25)
    other = ConsumedRecord("b", "t", 0, 7, "v7", 15)
    assert ledger.records_outside_ownership([inside, after, other]) == [after, other]


def test_concurrent_recording_is_thread_safe() -> None:
    ledger = OwnershipLedger()

    def member(name: str, partition: int) -> None:
        for i in range(500):
            ledger.record(i * 10, name, "assigned", [("t", partition)])
            ledger.record(i * 10 + 5, name, "revoked", [("t", partition)])

    threads = [threading.Thread(target=member, args=(f"m{i}", i)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ledger.events()) == 4000
    assert ledger.violations() == [] and ledger.anomalies() == []


def test_event_log_feeds_ledger_and_tracks_assignment() -> None:
    ledger = OwnershipLedger()
    log = ConsumerEventLog("a", ledger)
    log.emit("assigned", 10, partitions=[["t", 0], ["t", 1]])
    log.emit("record", 11, topic="t", partition=0, offset=0, value="x")
    log.emit("revoked", 12, partitions=[["t", 1]])
    assert log.assignment() == frozenset({T0})
    assert [r.value for r in log.consumed()] == ["x"]
    log.emit("gone", 13)
    assert log.assignment() == frozenset()
    assert ledger.current_assignment() == {}
    assert log.wait_for_assignment(lambda a: not a, timeout=0.1) == frozenset()
