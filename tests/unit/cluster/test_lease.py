import pytest

from coordinator.cluster.lease import Lease


def test_no_answer_before_the_first_renewal_nor_after_the_lease():
    lease = Lease(session_ms=10_000, margin_ms=2_000)
    assert not lease.valid(0)
    lease.renew(1_000)
    assert lease.valid(8_999) and not lease.valid(9_000)   # 10 s session minus a 2 s margin
    assert lease.remaining_ms(5_000) == 4_000


def test_a_late_answer_does_not_move_the_lease_back():
    lease = Lease(session_ms=10_000, margin_ms=1_000)
    lease.renew(5_000)
    lease.renew(3_000)       # an older heartbeat's answer arriving late
    assert lease.renewed_ms == 5_000


def test_a_process_paused_past_its_lease_answers_nothing():
    lease = Lease(session_ms=6_000, margin_ms=1_000)
    lease.renew(0)
    assert not lease.valid(60_000)      # SIGSTOP for a minute: stale, whatever the state says


def test_the_margin_must_be_below_the_session():
    with pytest.raises(ValueError, match="margin"):
        Lease(session_ms=1_000, margin_ms=1_000)
