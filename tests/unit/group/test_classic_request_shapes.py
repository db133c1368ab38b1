"""Every version of JoinGroup (v0-9), SyncGroup (v0-5) and Heartbeat (v0-4) forms and keeps a
classic group: the shard reads JoinGroup, SyncGroup, Heartbeat and LeaveGroup through one shape
each (coordinator/group/classic/requests.py), with Kafka's default for a field an old version lacks."""
from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.classic.group import ClassicGroupState
from coordinator.group.classic.requests import Heartbeat, JoinGroup, LeaveGroup, SyncGroup
from coordinator.group.kio_util import schema

from .context import Pending, ShardContext, topic
from .test_classic_groups import MS, cfg, heartbeat, join, sync


@pytest.mark.parametrize("join_v,sync_v,hb_v", [(v, min(v, 5), min(v, 4)) for v in range(10)])
def test_each_version_forms_a_group_and_heartbeats(join_v, sync_v, hb_v):
    c = ShardContext(topic("foo", 4), config=cfg())
    first = join(c, "g", version=join_v)
    if not isinstance(first, Pending) and first.error_code == ErrorCode.member_id_required:
        first = join(c, "g", first.member_id, version=join_v)   # KIP-394, v4+
    assert isinstance(first, Pending)
    c.advance(100)                                                # the initial rebalance delay
    joined = first.response
    assert joined.error_code == ErrorCode.none and joined.generation_id == 1
    member = joined.member_id
    answer = sync(c, "g", member, 1, {member: b"a"}, version=sync_v)
    assert answer.error_code == ErrorCode.none and answer.assignment == b"a"
    assert c.group("g").state is ClassicGroupState.STABLE
    assert heartbeat(c, "g", member, 1, version=hb_v) == ErrorCode.none


def test_the_shapes_take_kafkas_defaults_for_fields_old_versions_lack():
    v0 = schema("join_group", 0, "request").JoinGroupRequest(
        group_id="g", session_timeout=10_000 * MS, member_id="", protocol_type="consumer", protocols=())
    shape = JoinGroup.of(v0)
    assert shape.rebalance_timeout == 10_000 * MS     # v0: the session timeout serves as both
    assert shape.group_instance_id is None and shape.reason is None
    s0 = schema("sync_group", 0, "request").SyncGroupRequest(group_id="g", generation_id=1, member_id="m",
                                                             assignments=())
    assert SyncGroup.of(s0).protocol_name is None and SyncGroup.of(s0).group_instance_id is None


def test_heartbeat_and_leavegroup_shapes_take_kafkas_defaults():
    h2 = schema("heartbeat", 2, "request").HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    assert Heartbeat.of(h2).group_instance_id is None
    h3 = schema("heartbeat", 3, "request").HeartbeatRequest(group_id="g", generation_id=1, member_id="m",
                                                            group_instance_id="i")
    assert Heartbeat.of(h3).group_instance_id == "i"
    l2 = schema("leave_group", 2, "request").LeaveGroupRequest(group_id="g", member_id="m")
    assert LeaveGroup.of(l2).members == (("m", None),)       # v0-2 name one member, no instance id
    mod = schema("leave_group", 5, "request")
    l5 = mod.LeaveGroupRequest(group_id="g", members=(mod.MemberIdentity(member_id="", group_instance_id="i",
                                                                         reason="bye"),
                                                      mod.MemberIdentity(member_id="m2", group_instance_id=None,
                                                                         reason=None)))
    assert LeaveGroup.of(l5).members == (("", "i"), ("m2", None))
    assert not LeaveGroup.of(l2).lists_members and LeaveGroup.of(l5).lists_members
    assert LeaveGroup.of(l5).response_schema is schema("leave_group", 5)
    assert Heartbeat.of(h2).response_schema is schema("heartbeat", 2)


@pytest.mark.parametrize("version", range(10))
def test_the_join_shape_carries_what_its_version_changes(version):
    req = schema("join_group", version, "request").JoinGroupRequest(
        group_id="g", session_timeout=10_000 * MS, member_id="", protocol_type="consumer", protocols=())
    answer = JoinGroup.of(req).answer
    assert answer.response_schema is schema("join_group", version)
    assert answer.member_id_required is (version >= 4)           # KIP-394
    assert answer.skip_assignment is (version >= 9)              # KIP-814
    assert answer.nullable_protocol_name is (version >= 7)


@pytest.mark.parametrize("version", range(6))
def test_the_sync_shape_answers_in_its_version(version):
    req = schema("sync_group", version, "request").SyncGroupRequest(group_id="g", generation_id=1, member_id="m",
                                                                    assignments=())
    assert SyncGroup.of(req).response_schema is schema("sync_group", version)
