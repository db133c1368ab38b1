"""What the admin tools (kafka-streams-groups, `kcoord groups`) send to a streams group, answered
as Kafka 4.4's `StreamsGroup` answers: OffsetDelete of an input topic only once the group is
EMPTY, an admin OffsetCommit only to an EMPTY group, DeleteGroups only of an EMPTY group."""
from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.group.context import RequestContext
from coordinator.group.kio_util import schema

from .streams.driver import Driver, beat
from .streams.test_heartbeat import App, _fast


def _call(d: Driver, method: str, version: int, req):
    ctx = RequestContext(api_version=version, client_id="admin", client_host="/127.0.0.1")
    return d.apply(getattr(d.shard, method)(ctx, req, d.now_ms)).response


def _commit(d: Driver, offsets: dict[int, int], member: str = "", epoch: int = -1, version: int = 9):
    mod = schema("offset_commit", version, "request")
    req = mod.OffsetCommitRequest(group_id="app", generation_id_or_member_epoch=epoch, member_id=member,
                                  group_instance_id=None, topics=(mod.OffsetCommitRequestTopic(
                                      name="input", partitions=tuple(mod.OffsetCommitRequestPartition(
                                          partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                          committed_metadata="") for p, o in offsets.items())),))
    return {p.partition_index: p.error_code for t in _call(d, "offset_commit", version, req).topics
            for p in t.partitions}


def _offset_delete(d: Driver, partitions):
    mod = schema("offset_delete", 0, "request")
    req = mod.OffsetDeleteRequest(group_id="app", topics=(mod.OffsetDeleteRequestTopic(
        name="input", partitions=tuple(mod.OffsetDeleteRequestPartition(partition_index=p) for p in partitions)),))
    resp = _call(d, "offset_delete", 0, req)
    return resp.error_code, {p.partition_index: p.error_code for t in resp.topics for p in t.partitions}


def _delete_group(d: Driver):
    mod = schema("delete_groups", 2, "request")
    return _call(d, "delete_groups", 2, mod.DeleteGroupsRequest(groups_names=("app",))).results[0].error_code


def test_offset_delete_refuses_a_source_topic_while_the_group_runs_and_removes_it_once_empty():
    """Kafka 4.4's `StreamsGroup.isSubscribedToTopic`: the topology's source topics while the
    group is not EMPTY (seen on Kafka 4.4 in tests/integration/streams/test_streams_groups_tools.py)."""
    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    app.settle()
    assert set(_commit(d, {0: 5, 1: 6}, "m1", app.epoch["m1"]).values()) == {ErrorCode.none}
    assert _offset_delete(d, [0]) == (ErrorCode.none, {0: ErrorCode.group_subscribed_to_topic})
    assert d.shard.offsets.get("app", "input", 0).offset == 5
    assert d.hb(beat("m1", -1)).error_code == ErrorCode.none
    assert _offset_delete(d, [0]) == (ErrorCode.none, {0: ErrorCode.none})
    assert d.shard.offsets.get("app", "input", 0) is None
    assert d.shard.offsets.get("app", "input", 1).offset == 6
    assert d.reloaded().offsets.get("app", "input", 0) is None      # the tombstone replays


def test_an_admin_commit_and_delete_need_the_group_empty():
    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    app.settle()
    assert set(_commit(d, {0: 1}, version=8).values()) == {ErrorCode.unknown_member_id}
    assert _delete_group(d) == ErrorCode.non_empty_group
    assert d.hb(beat("m1", -1)).error_code == ErrorCode.none
    assert d.group().is_empty()
    # kafka-streams-groups --reset-offsets --execute: OffsetCommit, no member, generation -1
    assert set(_commit(d, {0: 3, 1: 4}, version=8).values()) == {ErrorCode.none}
    assert d.shard.offsets.get("app", "input", 1).offset == 4
    assert _delete_group(d) == ErrorCode.none
    assert "app" not in d.shard.groups and "app" not in d.reloaded().groups
