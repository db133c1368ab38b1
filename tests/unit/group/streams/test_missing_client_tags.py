"""MISSING_CLIENT_TAGS (status 6), as Kafka 4.4's `streamsGroupHeartbeat` sends it: the group's
`streams.rack.aware.assignment.tags` (its per-group configuration, else the broker's
`group.streams.rack.aware.assignment.tags`, kcoord's `streams_rack_aware_assignment_tags`)
names client-tag keys; a v1 heartbeat of a member that did not send one of them is answered
with the keys it lacks, after the other statuses, in Kafka's words; a v0 member never sees it."""
from __future__ import annotations

from datetime import timedelta

from coordinator.group.streams.membership import group_settings
from coordinator.group.streams.topology import MISSING_CLIENT_TAGS, SHUTDOWN_APPLICATION

from .driver import REQ, Driver, beat, image, subtopology, topology

TOP = topology(subtopology("0", sources=["input"], changelogs=["app-store-changelog"]))
READY = image(input=6, **{"app-store-changelog": 6})


def _join(member: str, **tags: str):
    return REQ.StreamsGroupHeartbeatRequest(
        group_id="app", member_id=member, member_epoch=0, endpoint_information_epoch=0,
        rebalance_timeout=timedelta(seconds=30), topology=TOP, active_tasks=(), standby_tasks=(), warmup_tasks=(),
        process_id="p-" + member, client_tags=tuple(REQ.KeyValue(key=k, value=v) for k, v in tags.items()),
        task_offsets=None, task_end_offsets=None)


def _driver(**config) -> Driver:
    return Driver(READY, streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=0, **config)


def _message(*keys: str) -> str:
    return (f"Missing required client tags for rack-aware standby assignment: [{', '.join(keys)}]. "
            "Configure them via 'client.tag.<tagKey>' in your Streams config.")


def test_no_tag_keys_no_status():
    d = _driver()
    assert MISSING_CLIENT_TAGS not in d.hb(_join("a")).statuses()


def test_the_groups_keys_name_what_the_member_lacks_in_their_order():
    d = _driver()
    d.shard.group_configs.replace("app", {"streams.rack.aware.assignment.tags": "zone,rack,host"})
    answer = d.hb(_join("a", rack="r1"))
    assert answer.error_code == 0 and answer.statuses()[MISSING_CLIENT_TAGS] == _message("zone", "host")
    # every heartbeat says it while the member lacks them; the member is served as any other
    again = d.hb(beat("a", answer.member_epoch))
    assert again.statuses()[MISSING_CLIENT_TAGS] == _message("zone", "host")
    assert d.group().members["a"].member_epoch == answer.member_epoch


def test_a_member_with_every_key_gets_no_status():
    d = _driver()
    d.shard.group_configs.replace("app", {"streams.rack.aware.assignment.tags": "zone"})
    assert MISSING_CLIENT_TAGS not in d.hb(_join("a", zone="z1", rack="r1")).statuses()


def test_the_serve_wide_keys_are_the_default_and_the_groups_own_replace_them():
    d = _driver(streams_rack_aware_assignment_tags=("zone",))
    assert d.hb(_join("a")).statuses()[MISSING_CLIENT_TAGS] == _message("zone")
    d.shard.group_configs.replace("app", {"streams.rack.aware.assignment.tags": "rack"})
    assert group_settings(d.shard, "app").rack_aware_assignment_tags == ("rack",)
    assert d.hb(_join("b", zone="z1")).statuses()[MISSING_CLIENT_TAGS] == _message("rack")


def test_a_v0_member_never_sees_it():
    d = _driver(streams_rack_aware_assignment_tags=("zone",))
    assert d.hb(_join("a"), version=0).statuses() == {}


def test_it_comes_after_shutdown_application():
    d = _driver(streams_rack_aware_assignment_tags=("zone",))
    epoch = d.hb(_join("a")).member_epoch
    answer = d.hb(beat("a", epoch, shutdown_application=True))
    assert [s.status_code for s in answer.status] == [SHUTDOWN_APPLICATION, MISSING_CLIENT_TAGS]


def test_the_serve_wide_keys_are_held_to_the_group_keys_rules():
    """`kcoord serve --config streams_rack_aware_assignment_tags=...` (or Kafka's name) refuses
    what the group key refuses, naming the setting: an empty key, a duplicate, past 5 keys."""
    import argparse

    import pytest

    from coordinator import cli

    def parsed(value: str):
        args = argparse.Namespace(state_topic="s", state_partitions=1,
                                  config=[f"group.streams.rack.aware.assignment.tags={value}"])
        return cli._configs_from_args(args)[0].streams_rack_aware_assignment_tags

    assert parsed(" zone , rack ") == ("zone", "rack")
    assert parsed("") == ()
    for bad, why in (("zone,", "values must not be empty"), ("zone,zone", "values must not be duplicated"),
                     ("a,b,c,d,e,f", "names 6 tag keys")):
        with pytest.raises(ValueError, match=f"--config group.streams.rack.aware.assignment.tags='{bad}': .*{why}"):
            parsed(bad)
