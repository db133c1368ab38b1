"""A new group type is a folder plus its contribution (tests/unit/group/toy/): the shard built with
a registry that holds it serves its API,
writes its records and replays them, fires its timers, takes its JoinGroup row over the
classic one, and the shared APIs (ListGroups, DeleteGroups) serve it through its
`GroupType`. Nothing in coordinator/group/classic/ or coordinator/group/modern/ knows it.

The toy's records are not in the `__consumer_offsets` codec (records/ has its own table),
so this test keeps its own log of the written records and replays them into a fresh shard,
as a reload would, instead of encoding them.
"""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group import group_types
from coordinator.group.builtin import builtin_registry, registry_with
from coordinator.group.context import RequestContext
from coordinator.group.group_types import Contribution
from coordinator.group.kio_util import schema
from coordinator.group.result import ScheduleTimer
from coordinator.group.shard import GroupCoordinatorShard

from . import toy
from .toy.group import ToyGroup
from .toy.heartbeat import SESSION_MS, ToyHeartbeat

NOW = 1_000_000


class Driver:
    """A shard, its log of written records, its timers and a clock."""

    def __init__(self) -> None:
        self.registry = registry_with(toy.CONTRIBUTION)
        self.shard = GroupCoordinatorShard(0, registry=self.registry)
        self.log: list = []
        self.timers: dict[tuple, tuple[int, object]] = {}
        self.now_ms = NOW

    def apply(self, result):
        self.shard.apply(result)
        if result.replay:
            self.log.extend(result.records)
        for t in result.timers:
            if isinstance(t, ScheduleTimer):
                self.timers[t.key] = (t.deadline_ms, t.payload)
            else:
                self.timers.pop(t.key, None)
        return result.response

    def call(self, operation: str, req, version: int = 0):
        ctx = RequestContext(api_version=version, client_id="client", client_host="/127.0.0.1")
        return self.apply(self.shard.handle(operation, ctx, req, self.now_ms))

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        for key, (deadline, payload) in sorted(self.timers.items(), key=lambda kv: kv[1][0]):
            if deadline <= self.now_ms:
                del self.timers[key]
                self.apply(self.shard.on_timer(key, payload, self.now_ms))

    def reloaded(self) -> GroupCoordinatorShard:
        fresh = GroupCoordinatorShard(0, registry=self.registry)
        for offset, record in enumerate(self.log):
            fresh.replay(record, offset)
        return fresh


@pytest.fixture
def d():
    try:
        yield Driver()
    finally:
        group_types.unregister(ToyGroup)     # the process-wide `group_type` table


def test_the_shard_serves_the_toy_heartbeat_through_its_row_and_replays_its_records(d):
    assert d.call(toy.OPERATION, ToyHeartbeat("t", "m1")).heartbeats == 1
    assert d.call(toy.OPERATION, ToyHeartbeat("t", "m1")).heartbeats == 2
    assert d.call(toy.OPERATION, ToyHeartbeat("t", "m2")).heartbeats == 1
    group = d.shard.groups["t"]
    assert isinstance(group, ToyGroup) and group.members == {"m1": 2, "m2": 1}
    assert [type(r.key).__name__ for r in d.log] == ["ToyGroupKey", "ToyMemberKey", "ToyMemberKey", "ToyMemberKey"]
    assert d.reloaded().groups["t"] == group


def test_a_toy_heartbeat_for_a_group_of_another_type_is_refused(d):
    cghb = schema("consumer_group_heartbeat", 1, "request")
    d.apply(d.shard.consumer_group_heartbeat(RequestContext(api_version=1), cghb.ConsumerGroupHeartbeatRequest(
        group_id="c", member_id="m-of-c", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=timedelta(minutes=5), subscribed_topic_names=(), subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=()), d.now_ms))
    assert type(d.shard.groups["c"]).__name__ == "ConsumerGroup"
    assert d.call(toy.OPERATION, ToyHeartbeat("c", "m1")).error_code == ErrorCode.inconsistent_group_protocol
    assert type(d.shard.groups["c"]).__name__ == "ConsumerGroup"


def test_the_toy_session_timer_removes_a_silent_member_and_the_empty_group_stays(d):
    d.call(toy.OPERATION, ToyHeartbeat("t", "m1"))
    d.advance(SESSION_MS // 2)
    d.call(toy.OPERATION, ToyHeartbeat("t", "m2"))
    d.advance(SESSION_MS // 2)            # m1's session ends; m2 has half of its left
    assert d.shard.groups["t"].members == {"m2": 1}
    d.advance(SESSION_MS)
    assert d.shard.groups["t"].members == {}
    assert d.reloaded().groups["t"].members == {}


def test_joingroup_on_a_toy_group_is_served_by_the_toy_row_not_the_classic_one(d):
    d.call(toy.OPERATION, ToyHeartbeat("t", "m1"))
    d.advance(SESSION_MS)
    assert d.shard.groups["t"].is_empty()  # the classic JoinGroup would replace an empty group
    jmod = schema("join_group", 9, "request")
    req = jmod.JoinGroupRequest(group_id="t", session_timeout=timedelta(seconds=30),
                                rebalance_timeout=timedelta(seconds=60), member_id="", group_instance_id=None,
                                protocol_type="consumer", protocols=(), reason=None)
    ctx = RequestContext(api_version=9, client_id="client", client_host="/127.0.0.1")
    response = d.apply(d.shard.join_group(ctx, req, d.now_ms))
    assert response.error_code == ErrorCode.inconsistent_group_protocol
    assert isinstance(d.shard.groups["t"], ToyGroup)


def test_list_and_delete_groups_serve_the_toy_through_its_group_type(d):
    d.call(toy.OPERATION, ToyHeartbeat("busy", "m1"))
    d.call(toy.OPERATION, ToyHeartbeat("idle", "m1"))
    d.advance(SESSION_MS)
    d.call(toy.OPERATION, ToyHeartbeat("busy", "m1"))
    ctx5 = RequestContext(api_version=5)
    lmod = schema("list_groups", 5, "request")
    listed = d.apply(d.shard.list_groups(ctx5, lmod.ListGroupsRequest(states_filter=(), types_filter=("toy",)),
                                         d.now_ms))
    assert {g.group_id: (g.group_type, g.group_state) for g in listed.groups} == {
        "busy": ("toy", "Stable"), "idle": ("toy", "Empty")}
    dmod = schema("delete_groups", 2, "request")
    deleted = d.apply(d.shard.delete_groups(RequestContext(api_version=2),
                                            dmod.DeleteGroupsRequest(groups_names=("busy", "idle")), d.now_ms))
    assert {r.group_id: r.error_code for r in deleted.results} == {"busy": ErrorCode.non_empty_group,
                                                                   "idle": ErrorCode.none}
    assert "idle" not in d.shard.groups and "idle" not in d.reloaded().groups


def test_the_toy_operation_is_an_attribute_of_its_shard_only(d):
    ctx = RequestContext(api_version=0)
    assert d.apply(d.shard.toy_heartbeat(ctx, ToyHeartbeat("t", "m1"), d.now_ms)).heartbeats == 1
    plain = GroupCoordinatorShard(0)     # the built-in registry: no toy
    assert toy.OPERATION not in builtin_registry().operations
    assert ToyGroup not in builtin_registry().operations["join_group"]
    with pytest.raises(AttributeError, match="toy_heartbeat"):
        plain.toy_heartbeat  # noqa: B018


def test_a_row_is_contributed_once(d):
    again = Contribution(name="toy again", operations=((toy.OPERATION, ToyGroup, lambda *a: None),))
    with pytest.raises(ValueError, match="already has a handler for ToyGroup"):
        registry_with(toy.CONTRIBUTION, again)


def test_a_timer_kind_is_contributed_once(d):
    again = Contribution(name="toy again", timers=dict(toy.CONTRIBUTION.timers))
    with pytest.raises(ValueError, match="timer kind 'toy-session' is contributed twice"):
        registry_with(toy.CONTRIBUTION, again)


def test_the_classic_and_modern_folders_do_not_name_the_toy():
    root = Path(__file__).resolve().parents[3] / "coordinator" / "group"
    for folder in ("classic", "modern"):
        for path in (root / folder).rglob("*.py"):
            assert "toy" not in path.read_text().lower(), path
