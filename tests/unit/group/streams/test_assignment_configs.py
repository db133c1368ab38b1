"""The group's assignment configs, as Kafka 4.4 keeps them in record 17's LastAssignmentConfigs
(`streamsGroupAssignmentConfigs`): `num.standby.replicas`, and `rack.aware.assignment.tags`
when the group has client-tag keys. A heartbeat that finds them changed bumps the group epoch
("Assignment configurations changed ... Triggering rebalance.") and records the new ones; a
member's removal records the group's last ones, so the next heartbeat still sees the change."""
from __future__ import annotations

from datetime import timedelta

from .driver import REQ, Driver, beat, image, subtopology, topology

TOP = topology(subtopology("0", sources=["input"], changelogs=["app-store-changelog"]))
READY = image(input=4, **{"app-store-changelog": 4})


def _join(member: str):
    return REQ.StreamsGroupHeartbeatRequest(
        group_id="app", member_id=member, member_epoch=0, endpoint_information_epoch=0,
        rebalance_timeout=timedelta(seconds=30), topology=TOP, active_tasks=(), standby_tasks=(), warmup_tasks=(),
        process_id="p-" + member, client_tags=(), task_offsets=None, task_end_offsets=None)


def _driver() -> Driver:
    return Driver(READY, streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=0)


def test_a_change_of_standbys_or_tag_keys_bumps_the_epoch_and_is_recorded():
    d = _driver()
    a = d.hb(_join("a")).member_epoch
    d.hb(_join("b"))
    group = d.group()
    assert group.last_assignment_configs == (("num.standby.replicas", "0"),)
    assert not any(t.standby for t in group.target.values())
    epoch = group.group_epoch
    d.shard.group_configs.replace("app", {"streams.num.standby.replicas": "1"})
    d.hb(beat("a", a))
    assert d.group().group_epoch == epoch + 1
    assert d.group().last_assignment_configs == (("num.standby.replicas", "1"),)
    assert any(t.standby for t in d.group().target.values())    # the new target has the standbys
    d.shard.group_configs.replace("app", {"streams.num.standby.replicas": "1",
                                          "streams.rack.aware.assignment.tags": "zone,rack"})
    d.hb(beat("a", d.group().members["a"].member_epoch))
    assert d.group().group_epoch == epoch + 2
    assert d.group().last_assignment_configs == (("num.standby.replicas", "1"),
                                                 ("rack.aware.assignment.tags", "zone,rack"))
    d.hb(beat("a", d.group().members["a"].member_epoch))     # unchanged: no bump
    assert d.group().group_epoch == epoch + 2
    assert d.reloaded().groups["app"].last_assignment_configs == d.group().last_assignment_configs


def test_a_removal_keeps_the_last_configs_and_the_next_heartbeat_records_the_change():
    d = _driver()
    a = d.hb(_join("a")).member_epoch
    d.hb(_join("b"))
    epoch = d.group().group_epoch
    d.shard.group_configs.replace("app", {"streams.num.standby.replicas": "1"})
    d.hb(beat("b", -1))                                       # b leaves
    assert d.group().group_epoch == epoch + 1
    assert d.group().last_assignment_configs == (("num.standby.replicas", "0"),)
    d.hb(beat("a", a))
    assert d.group().group_epoch == epoch + 2
    assert d.group().last_assignment_configs == (("num.standby.replicas", "1"),)
