"""StreamsGroupDescribe from the state, and the offline migration rules between classic and
streams groups (JoinGroup on a streams group; the heartbeat on other types is in test_heartbeat)."""
from __future__ import annotations

from datetime import timedelta

from kio.schema.errors import ErrorCode

from coordinator.group.classic.group import ClassicGroup
from coordinator.group.context import RequestContext
from coordinator.group.kio_util import schema
from coordinator.group.streams import contribution

from .driver import Answer, beat, join
from .test_heartbeat import ALL, TOP, App, _fast


def _describe(d, *group_ids, version=1):
    mod = schema("streams_group_describe", version, "request")
    req = mod.StreamsGroupDescribeRequest(group_ids=group_ids, include_authorized_operations=False)
    ctx = RequestContext(api_version=version, client_id="admin", client_host="/127.0.0.1")
    return d.apply(getattr(d.shard, contribution.DESCRIBE)(ctx, req, d.now_ms)).response


def test_describe_shows_members_assignments_and_the_topology():
    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    app.join("m2", "p2")
    app.settle()
    d.shard.groups["classic"] = ClassicGroup("classic")
    resp = _describe(d, "app", "missing", "classic")
    app_group, missing, classic = resp.groups
    assert (app_group.error_code, app_group.group_state, app_group.assignor_name) == (ErrorCode.none, "Stable",
                                                                                      "sticky")
    assert app_group.group_epoch == app_group.assignment_epoch == d.group().group_epoch
    assert [m.member_id for m in app_group.members] == ["m1", "m2"]
    active = {(t.subtopology_id, p) for m in app_group.members for t in m.assignment.active_tasks
              for p in t.partitions}
    assert active == ALL
    assert all(m.assignment == m.target_assignment and m.process_id in ("p1", "p2") for m in app_group.members)
    assert app_group.topology.epoch == 1 and app_group.topology.subtopologies[0].source_topics == ("input",)
    assert (missing.error_code, missing.error_message) == (ErrorCode.group_id_not_found, "Group missing not found.")
    assert (classic.error_code, classic.error_message) == (ErrorCode.group_id_not_found,
                                                           "Group classic is not a streams group.")
    assert _describe(d, "app", version=0).groups[0].group_state == "Stable"


def _join_group(d, group_id="app"):
    mod = schema("join_group", 9, "request")
    req = mod.JoinGroupRequest(group_id=group_id, session_timeout=timedelta(seconds=30),
                               rebalance_timeout=timedelta(seconds=60), member_id="", group_instance_id=None,
                               protocol_type="consumer", protocols=(), reason=None)
    ctx = RequestContext(api_version=9, client_id="client", client_host="/127.0.0.1")
    return d.apply(d.shard.join_group(ctx, req, d.now_ms)).response


def test_joingroup_is_refused_on_a_streams_group_with_members_and_converts_an_empty_one():
    d = _fast()
    a = Answer(d.hb(join("m1", "p1", TOP)).raw)
    assert _join_group(d).error_code == ErrorCode.inconsistent_group_protocol
    assert d.group().group_type == "streams"
    assert d.hb(beat("m1", -1)).error_code == ErrorCode.none and a.member_epoch > 0
    assert d.group().is_empty()
    _join_group(d)                       # member id required (v4+), but the group is classic now
    assert isinstance(d.shard.groups["app"], ClassicGroup)
    assert isinstance(d.reloaded().groups["app"], ClassicGroup)   # the streams tombstones, then the classic group


def test_a_members_plain_commit_needs_v9_but_its_transactional_commit_passes_at_any_version():
    """Kafka's `StreamsGroup.validateOffsetCommit`: `!isTransactional && apiVersion < 9` is
    UNSUPPORTED_VERSION; an exactly-once v2 member's TxnOffsetCommit (v0-6) goes on to the
    epoch check."""
    from coordinator.group.errors import ApiError
    from coordinator.group.streams.group_type import validate_streams_commit

    d = _fast()
    app = App(d)
    app.join("m1", "p1")
    app.settle()
    group, epoch = d.group(), app.epoch["m1"]
    try:
        validate_streams_commit(group, "m1", epoch, 8)
        raise AssertionError("a plain OffsetCommit v8 from a streams member was accepted")
    except ApiError as e:
        assert e.code == ErrorCode.unsupported_version
    for version in (0, 3, 5, 6):
        assert validate_streams_commit(group, "m1", epoch, version, transactional=True) is not None
    try:
        validate_streams_commit(group, "m1", epoch + 1, 6, transactional=True)
        raise AssertionError("a newer epoch was accepted")
    except ApiError as e:
        assert e.code == ErrorCode.stale_member_epoch
