"""The timer table (coordinator/group/timers.py): every kind has one handler, and a timer
whose group or member is gone (or whose member moved on to another epoch) does nothing."""
from __future__ import annotations

import pytest

from coordinator.group import timers
from coordinator.group.builtin import builtin_registry
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.group.timers import TimerKind


def test_every_kind_has_exactly_one_handler():
    assert set(builtin_registry().timers) == {k.value for k in TimerKind}


@pytest.mark.parametrize("key, payload", [
    (timers.session_timer("gone", "m"), None),
    (timers.rebalance_timer("gone", "m"), 3),
    (timers.join_timer("gone", "m"), None),
    (timers.sync_timer("gone", "m"), None),
    (timers.assignment_key("gone"), None),
    (timers.regex_refresh_key("gone"), None),
    (timers.join_key("gone"), 1),
    (timers.sync_key("gone"), 1),
    (timers.heartbeat_key("gone", "m"), None),
])
def test_a_timer_of_a_group_that_is_gone_does_nothing(key, payload):
    result = GroupCoordinatorShard(0).on_timer(key, payload, 1_000)
    assert not result.records and not result.timers and result.response is None


def test_keys_start_with_their_kind():
    assert timers.session_timer("g", "m") == ("session-timeout", "g", "m")
    assert timers.heartbeat_key("g", "m")[0] == TimerKind.CLASSIC_HEARTBEAT.value
    assert timers.EXPIRE_KEY == ("expire-group-metadata",)
