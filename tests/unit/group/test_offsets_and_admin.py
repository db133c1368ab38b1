"""Offset commit/fetch/delete and group admin APIs on the sans-IO shard."""
from __future__ import annotations

from datetime import timedelta

from kio.schema.errors import ErrorCode

from coordinator.group.errors import ApiError
from coordinator.group.kio_util import schema
from coordinator.group.offsets.ops import fetch_offsets
from coordinator.group.offsets.requests import fetch_answer
from records import decode_record

from .context import ShardContext, topic
from .test_consumer_heartbeat import fast

FOO = topic("foo", 4)


def commit(c: ShardContext, group: str, member: str, epoch: int, offsets: dict, version: int = 9,
           by_id: bool = False):
    mod = schema("offset_commit", version, "request")
    topics = []
    for name, parts in offsets.items():
        ps = tuple(mod.OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                   committed_leader_epoch=-1, committed_metadata="m")
                   if version >= 6 else
                   mod.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="m")
                   for p, o in parts.items())
        if by_id:
            topics.append(mod.OffsetCommitRequestTopic(topic_id=c.id_of(name), partitions=ps))
        else:
            topics.append(mod.OffsetCommitRequestTopic(name=name, partitions=ps))
    kw = dict(group_id=group, generation_id_or_member_epoch=epoch, member_id=member, topics=tuple(topics))
    if version >= 7:
        kw["group_instance_id"] = None
    if version <= 4:
        kw["retention_time"] = timedelta(milliseconds=-1)
    return c.call("offset_commit", mod.OffsetCommitRequest(**kw), version)


def errors(resp) -> dict:
    return {(getattr(t, "name", None) or t.topic_id, p.partition_index): p.error_code
            for t in resp.topics for p in t.partitions}


def fetch(c: ShardContext, group: str, topics=None, version: int = 7):
    mod = schema("offset_fetch", version, "request")
    ts = None if topics is None else tuple(
        mod.OffsetFetchRequestTopic(name=n, partition_indexes=tuple(ps)) for n, ps in topics.items())
    resp = c.call("offset_fetch", mod.OffsetFetchRequest(group_id=group, topics=ts, require_stable=False), version)
    return resp.error_code, {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}


def test_admin_commit_creates_simple_group_and_fetch_returns_it():
    c = ShardContext(FOO)
    resp = commit(c, "g", "", -1, {"foo": {0: 10, 1: 20}})
    assert set(errors(resp).values()) == {ErrorCode.none}
    assert fetch(c, "g") == (ErrorCode.none, {("foo", 0): 10, ("foo", 1): 20})
    assert fetch(c, "g", {"foo": [0, 3]}) == (ErrorCode.none, {("foo", 0): 10, ("foo", 3): -1})
    assert fetch(c, "missing", {"foo": [0]}) == (ErrorCode.none, {("foo", 0): -1})
    assert c.group("g").is_simple()


def test_commit_to_unknown_topic_or_partition_fails_only_those_partitions():
    c = ShardContext(FOO)
    e = errors(commit(c, "g", "", -1, {"foo": {0: 1, 9: 1}, "nope": {0: 1}}))
    assert e == {("foo", 0): ErrorCode.none, ("foo", 9): ErrorCode.unknown_topic_or_partition,
                 ("nope", 0): ErrorCode.unknown_topic_or_partition}
    # 4.3 persists the topic id even for commits that name topics (v <= 9).
    assert decode_record(c.log[-1][1], c.log[-1][2]).value.topic_id == c.id_of("foo")


def test_commit_to_missing_group_with_epoch():
    c = ShardContext(FOO)
    assert set(errors(commit(c, "g", "m", 3, {"foo": {0: 1}})).values()) == {ErrorCode.group_id_not_found}
    assert set(errors(commit(c, "g", "m", 3, {"foo": {0: 1}}, version=8)).values()) == {ErrorCode.illegal_generation}


def test_kip1251_relaxed_commit_fencing():
    c = ShardContext(FOO, config=fast())
    r = c.heartbeat("g", "m1", 0, topics=["foo"])  # epoch 2, owns foo 0-3 at assignment epoch 2
    c.heartbeat("g", "m2", 0, topics=["foo"])  # group epoch 3
    r = c.heartbeat("g", "m1", 2, owned={"foo": range(4)})
    kept = c.assigned(r)["foo"]
    r = c.heartbeat("g", "m1", 2, owned={"foo": kept})
    assert r.member_epoch == 3
    revoked = sorted(set(range(4)) - kept)
    k = sorted(kept)
    # A commit with the old epoch 2 for a partition m1 still owns (assigned at 2) is accepted:
    # that is KIP-1251's point (seed 002), Kafka <= 4.2 rejected it.
    assert set(errors(commit(c, "g", "m1", 2, {"foo": {k[0]: 5}})).values()) == {ErrorCode.none}
    # ...but not for a partition it no longer owns (a zombie commit); like Kafka, one fenced
    # partition fails the whole request and nothing is written.
    before = len(c.log)
    e = errors(commit(c, "g", "m1", 2, {"foo": {k[0]: 5, revoked[0]: 5}}))
    assert set(e.values()) == {ErrorCode.stale_member_epoch} and len(c.log) == before
    # Current epoch: accepted for any partition; a future epoch: stale.
    assert set(errors(commit(c, "g", "m1", 3, {"foo": {revoked[0]: 6}})).values()) == {ErrorCode.none}
    assert set(errors(commit(c, "g", "m1", 4, {"foo": {k[0]: 6}})).values()) == {ErrorCode.stale_member_epoch}
    assert set(errors(commit(c, "g", "zz", 3, {"foo": {k[0]: 6}})).values()) == {ErrorCode.unknown_member_id}
    # Consumer-protocol members must use OffsetCommit v9+.
    assert set(errors(commit(c, "g", "m1", 3, {"foo": {k[0]: 6}}, version=8)).values()) == {ErrorCode.unsupported_version}


def test_commit_v10_by_topic_id_and_unknown_id():
    c = ShardContext(FOO)
    resp = commit(c, "g", "", -1, {"foo": {0: 7}}, version=10, by_id=True)
    assert set(errors(resp).values()) == {ErrorCode.none}
    rec = decode_record(c.log[-1][1], c.log[-1][2])
    assert rec.value.topic_id == c.id_of("foo") and rec.value_version == 4


def test_metadata_too_large():
    c = ShardContext(FOO)
    mod = schema("offset_commit", 9, "request")
    req = mod.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                  group_instance_id=None, topics=(mod.OffsetCommitRequestTopic(
                                      name="foo", partitions=(mod.OffsetCommitRequestPartition(
                                          partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                          committed_metadata="x" * 5000),)),))
    resp = c.call("offset_commit", req, 9)
    assert errors(resp) == {("foo", 0): ErrorCode.offset_metadata_too_large}


def test_offset_fetch_v9_member_epoch_validation():
    c = ShardContext(FOO, config=fast())
    c.heartbeat("g", "m1", 0, topics=["foo"])
    assert fetch_offsets(c.shard, fetch_answer(9), "g", None, False, "m1", 2) == []
    for member, epoch, code in (("m1", 1, ErrorCode.stale_member_epoch), ("zz", 2, ErrorCode.unknown_member_id)):
        try:
            fetch_offsets(c.shard, fetch_answer(9), "g", None, False, member, epoch)
            raise AssertionError("expected an error")
        except ApiError as e:
            assert e.code == code


def test_list_describe_delete_groups():
    c = ShardContext(FOO, config=fast())
    c.heartbeat("g", "m1", 0, topics=["foo"])
    commit(c, "simple", "", -1, {"foo": {0: 1}})
    lmod = schema("list_groups", 5, "request")
    resp = c.call("list_groups", lmod.ListGroupsRequest(states_filter=(), types_filter=()), 5)
    listed = {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in resp.groups}
    assert listed == {"g": ("consumer", "Stable", "consumer"), "simple": ("", "Empty", "classic")}
    resp = c.call("list_groups", lmod.ListGroupsRequest(states_filter=("STABLE",), types_filter=("consumer",)), 5)
    assert [g.group_id for g in resp.groups] == ["g"]

    dmod = schema("consumer_group_describe", 1, "request")
    resp = c.call("consumer_group_describe", dmod.ConsumerGroupDescribeRequest(
        group_ids=("g", "simple", "nope"), include_authorized_operations=False), 1)
    g, simple, nope = resp.groups
    assert g.error_code == ErrorCode.none and g.group_state == "Stable" and g.assignor_name == "uniform"
    (m,) = g.members
    assert m.member_type == 1 and m.member_epoch == 2 and m.client_host == "/127.0.0.1"
    assert {tp.topic_name: set(tp.partitions) for tp in m.assignment.topic_partitions} == {"foo": {0, 1, 2, 3}}
    assert simple.error_code == nope.error_code == ErrorCode.group_id_not_found
    # As Kafka 4.3 answers (differential test): the other fields keep their defaults.
    assert (simple.group_state, nope.group_state, nope.group_epoch, nope.members) == ("", "", 0, ())
    resp = c.call("consumer_group_describe", dmod.ConsumerGroupDescribeRequest(
        group_ids=("",), include_authorized_operations=False), 1)
    assert [(d.error_code, d.error_message) for d in resp.groups] == [(ErrorCode.invalid_group_id, None)]

    delmod = schema("delete_groups", 2, "request")
    resp = c.call("delete_groups", delmod.DeleteGroupsRequest(groups_names=("g", "simple", "nope")), 2)
    assert {r.group_id: r.error_code for r in resp.results} == {
        "g": ErrorCode.non_empty_group, "simple": ErrorCode.none, "nope": ErrorCode.group_id_not_found}
    assert "simple" not in c.shard.groups and not c.shard.offsets.has_offsets("simple")

    c.heartbeat("g", "m1", -1)
    resp = c.call("delete_groups", delmod.DeleteGroupsRequest(groups_names=("g",)), 2)
    assert resp.results[0].error_code == ErrorCode.none
    assert "g" not in c.shard.groups
    assert "g" not in c.reload().groups  # the tombstones replay cleanly


def test_offset_delete_refuses_subscribed_topics():
    bar = topic("bar", 2)
    c = ShardContext(FOO, bar, config=fast())
    c.heartbeat("g", "m1", 0, topics=["foo"])
    commit(c, "g", "m1", 2, {"foo": {0: 1}})
    commit(c, "g", "m1", 2, {"bar": {0: 1}})
    mod = schema("offset_delete", 0, "request")
    req = mod.OffsetDeleteRequest(group_id="g", topics=(
        mod.OffsetDeleteRequestTopic(name="foo", partitions=(mod.OffsetDeleteRequestPartition(partition_index=0),)),
        mod.OffsetDeleteRequestTopic(name="bar", partitions=(mod.OffsetDeleteRequestPartition(partition_index=0),))))
    resp = c.call("offset_delete", req, 0)
    assert errors(resp) == {("foo", 0): ErrorCode.group_subscribed_to_topic, ("bar", 0): ErrorCode.none}
    assert c.shard.offsets.get("g", "bar", 0) is None and c.shard.offsets.get("g", "foo", 0) is not None


def test_offsets_of_an_empty_simple_group_expire_after_retention():
    from coordinator.config import CoordinatorConfig
    c = ShardContext(FOO, config=CoordinatorConfig(offsets_retention_ms=60_000,
                                                   offsets_retention_check_interval_ms=10_000))
    c.loaded()
    commit(c, "g", "", -1, {"foo": {0: 5}})
    c.advance(30_000)
    assert c.shard.offsets.get("g", "foo", 0) is not None  # not yet
    c.advance(40_000)
    assert c.shard.offsets.get("g", "foo", 0) is None and "g" not in c.shard.groups
    assert "g" not in c.reload().groups


def test_consumer_group_keeps_offsets_of_subscribed_topics_and_deleted_topics_are_dropped():
    from coordinator.config import CoordinatorConfig
    bar = topic("bar", 2)
    c = ShardContext(FOO, bar, config=CoordinatorConfig(offsets_retention_ms=1_000, consumer_assignment_interval_ms=0))
    c.heartbeat("g", "m1", 0, topics=["foo"])
    commit(c, "g", "m1", 2, {"foo": {0: 1}, "bar": {0: 1}})
    c.advance(5_000)
    c.apply(c.shard.on_timer(("expire-group-metadata",), None, c.now_ms))
    # bar is not subscribed and past retention: expired; foo is consumed: kept.
    assert c.shard.offsets.get("g", "bar", 0) is None and c.shard.offsets.get("g", "foo", 0) is not None
    c.update_image(bar)  # foo deleted upstream
    c.advance(0)
    assert c.shard.offsets.get("g", "foo", 0) is None
