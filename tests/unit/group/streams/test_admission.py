"""Who may join a streams group, on the shard with a simulated clock: GROUP_MAX_SIZE_REACHED
in a full group (Kafka 4.4's `group.streams.max.size`, its message), a known member's rejoin
and a static member's replacement allowed even then, UNRELEASED_INSTANCE_ID before the size,
FENCED_INSTANCE_ID for a heartbeat under another member's instance id."""
from __future__ import annotations

from kio.schema.errors import ErrorCode

from .driver import Driver, beat, image, join, subtopology, topology

TOP = topology(subtopology("0", sources=["input"]))
FULL = "The streams group has reached its maximum capacity of 2 members."


def _full(**kw) -> Driver:
    """A group at its maximum of two members: m1 (static, instance i1) and m2."""
    d = Driver(image(input=4), streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=0,
               streams_max_size=2, **kw)
    assert d.hb(join("m1", "p1", TOP, instance_id="i1")).error_code == ErrorCode.none
    assert d.hb(join("m2", "p2", TOP)).error_code == ErrorCode.none
    return d


def test_a_new_member_of_a_full_group_is_refused_with_kafkas_message():
    d = _full()
    written = len(d.log)
    a = d.hb(join("m3", "p3", TOP))
    assert (a.error_code, a.error_message) == (ErrorCode.group_max_size_reached, FULL)
    a = d.hb(join("m3", "p3", TOP, instance_id="i3"))          # a new static member too
    assert (a.error_code, a.error_message) == (ErrorCode.group_max_size_reached, FULL)
    assert len(d.log) == written and set(d.group().members) == {"m1", "m2"}


def test_a_member_that_left_frees_its_place():
    d = _full()
    epoch = d.group().members["m2"].member_epoch
    assert d.hb(beat("m2", -1)).error_code == ErrorCode.none
    assert d.hb(beat("m2", epoch)).error_code == ErrorCode.unknown_member_id
    assert d.hb(join("m3", "p3", TOP)).error_code == ErrorCode.none


def test_a_known_member_may_rejoin_a_full_group():
    d = _full()
    a = d.hb(join("m2", "p2", TOP))
    assert a.error_code == ErrorCode.none and a.member_epoch == d.group().members["m2"].member_epoch


def test_a_static_member_takes_its_own_place_in_a_full_group():
    d = _full()
    left = d.hb(beat("m1", -2, instance_id="i1"))
    assert left.error_code == ErrorCode.none and left.member_epoch == -2
    a = d.hb(join("m1b", "p1", TOP, instance_id="i1"))
    assert a.error_code == ErrorCode.none
    assert set(d.group().members) == {"m1b", "m2"}


def test_an_instance_id_still_in_use_is_unreleased_even_in_a_full_group():
    d = _full()
    a = d.hb(join("m9", "p9", TOP, instance_id="i1"))
    assert a.error_code == ErrorCode.unreleased_instance_id
    assert a.error_message == ("Static member m9 with instance id i1 cannot join the group because the instance id "
                               "is owned by m1 member.")


def test_a_heartbeat_under_another_members_instance_id_is_fenced():
    d = _full()
    a = d.hb(beat("m9", 1000, instance_id="i1"))
    assert a.error_code == ErrorCode.fenced_instance_id
    assert a.error_message == "Static member m9 with instance id i1 was fenced by member m1."
    own = d.hb(beat("m1", d.group().members["m1"].member_epoch, instance_id="i1"))
    assert own.error_code == ErrorCode.none


def test_without_a_configured_maximum_groups_are_not_bounded():
    d = Driver(image(input=4), streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=0)
    for i in range(5):
        assert d.hb(join(f"m{i}", f"p{i}", TOP)).error_code == ErrorCode.none
