"""What the membership gives up on at once, naming what to change: a principal without rights
on the group, and a session timeout the broker refuses (INVALID_SESSION_TIMEOUT, outside its
group.min/max.session.timeout.ms). Anything else transient is retried (membership.run)."""
from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.cluster.upstream import Lost, MembershipRefused, Refind, Rejoin, raise_for


def test_a_refused_session_timeout_names_the_setting_its_value_and_the_brokers_bounds():
    with pytest.raises(MembershipRefused) as e:
        raise_for(ErrorCode.invalid_session_timeout, "JoinGroup", "kcoord-state", "solo-1", 3000)
    assert "cluster.session.timeout.ms=3000" in str(e.value)
    assert "group.min.session.timeout.ms..group.max.session.timeout.ms" in str(e.value)
    assert "kcoord-state" in str(e.value)


def test_a_refused_principal_names_the_acl():
    with pytest.raises(MembershipRefused, match="Group READ on kcoord-state"):
        raise_for(ErrorCode.group_authorization_failed, "JoinGroup", "kcoord-state", "kc-0")


@pytest.mark.parametrize("code, kind", [(ErrorCode.not_coordinator, Refind), (ErrorCode.unknown_member_id, Lost),
                                        (ErrorCode.rebalance_in_progress, Rejoin)])
def test_transient_answers_are_not_refusals(code, kind):
    with pytest.raises(kind):
        raise_for(code, "JoinGroup", "kcoord-state", "kc-0", 3000)


def test_none_raises_nothing():
    raise_for(ErrorCode.none, "JoinGroup", "kcoord-state", "kc-0")
