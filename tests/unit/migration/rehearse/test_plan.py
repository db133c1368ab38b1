"""The rolling-restart schedule and where Kafka converts the group (reference §5)."""
from __future__ import annotations

import pytest

from migration.rehearse.plan import RehearsalPlan, expected_conversions, rolling_schedule


def test_upgrade_restarts_every_member_once_from_classic_to_consumer() -> None:
    plan = RehearsalPlan("upgrade", "h:1", members=3)
    steps = rolling_schedule(plan)
    assert [(s.slot, s.from_protocol, s.to_protocol) for s in steps] == [
        (0, "classic", "consumer"), (1, "classic", "consumer"), (2, "classic", "consumer")]
    assert plan.start_protocol == "classic"


def test_round_trip_rolls_back_in_the_same_order() -> None:
    steps = rolling_schedule(RehearsalPlan("downgrade", "h:1", members=2, round_trip=True))
    assert [(s.index, s.phase, s.slot, s.to_protocol) for s in steps] == [
        (0, 0, 0, "classic"), (1, 0, 1, "classic"), (2, 1, 0, "consumer"), (3, 1, 1, "consumer")]


def test_kafka_converts_at_the_first_consumer_join_and_the_last_consumer_leave() -> None:
    exp = expected_conversions(RehearsalPlan("upgrade", "h:1", members=5, round_trip=True))
    assert [(e["step"], e["to"], e["trigger"]) for e in exp] == [(0, "consumer", "join"), (9, "classic", "leave")]
    exp = expected_conversions(RehearsalPlan("downgrade", "h:1", members=5))
    assert [(e["step"], e["to"], e["trigger"]) for e in exp] == [(4, "classic", "leave")]


def test_a_single_member_downgrade_converts_the_emptied_group_at_the_classic_join() -> None:
    exp = expected_conversions(RehearsalPlan("downgrade", "h:1", members=1))
    assert [(e["step"], e["to"], e["trigger"]) for e in exp] == [(0, "classic", "join")]


@pytest.mark.parametrize("kwargs, message", [
    (dict(direction="sideways"), "direction"),
    (dict(client="go"), "client"),
    (dict(members=0), "members"),
    (dict(partitions=0), "partitions"),
    (dict(bootstrap="no-port"), "bootstrap"),
])
def test_bad_plans_are_refused_with_the_field_named(kwargs, message) -> None:
    args = dict(direction="upgrade", bootstrap="h:1") | kwargs
    with pytest.raises(ValueError, match=message):
        RehearsalPlan(**args)


def test_default_names_carry_the_run_id() -> None:
    plan = RehearsalPlan("upgrade", "h:1", run_id="r1")
    assert plan.topic_name == plan.group_name == "kcoord-rehearse-r1"
    assert RehearsalPlan("upgrade", "h:1", topic="t", group="g").group_name == "g"
