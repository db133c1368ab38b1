"""Request validation and error answers, one raw request each on fresh or prepared groups, on
Kafka 4.3 and on kcoord in front of it: every error code and every other field must match
(error messages are free text, compared for presence). Covers ConsumerGroupHeartbeat's
argument checks, classic requests against missing groups and members, conflicting group
types, and the admin APIs on groups that do not exist.
"""
from __future__ import annotations

from datetime import timedelta

from classic_raw import ClassicMember, subscription

from support.differential import (
    CG_HEARTBEAT,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    SYNC_GROUP,
    RawMember,
    Transcript,
    assert_same,
    commit,
    delete_groups,
    describe_consumer_group,
    describe_groups,
    fetch,
    heartbeat_view,
    member_ids,
    offset_delete,
    plain,
    prepare_group,
)


def cg_heartbeat(side, **overrides) -> dict:
    fields = dict(group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
                  rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=("t",), subscribed_topic_regex=None,
                  server_assignor=None, topic_partitions=())
    fields.update(overrides)
    return heartbeat_view(side.call(CG_HEARTBEAT, 1, **fields))


def join_fields(side, group: str, **overrides) -> dict:
    t = side.types(JOIN_GROUP, 9)
    fields = dict(group_id=group, session_timeout=timedelta(seconds=10), rebalance_timeout=timedelta(seconds=10),
                  member_id="", group_instance_id=None, protocol_type="consumer", reason=None,
                  protocols=(t.JoinGroupRequestProtocol(name="range", metadata=subscription("t")),))
    return {**fields, **overrides}


def join(side, group: str, **overrides) -> dict:
    out = plain(side.call(JOIN_GROUP, 9, **join_fields(side, group, **overrides)))
    for key in ("member_id", "leader"):       # server-generated: compared for presence
        out[key] = bool(out[key])
    out["members"] = len(out["members"])
    return out


def validation(t: Transcript, groups: list[str], topic: str, ids: list[str]) -> Transcript:
    side = t.side
    consumer_group, classic_group, connect_group, missing = groups
    for g in groups:
        prepare_group(side, g)
    a = RawMember(side, consumer_group, ids[0], topics=(topic,))
    a.heartbeat_until(lambda r: a.owned_count() == 6, message="6 partitions")
    t.add("cg: empty group id", cg_heartbeat(side, group_id="", member_id=ids[1]))
    t.add("cg: empty member id at epoch 0", cg_heartbeat(side, group_id=consumer_group, member_id=""))
    t.add("cg: rebalance timeout missing at join", cg_heartbeat(
        side, group_id=consumer_group, member_id=ids[1], rebalance_timeout=timedelta(milliseconds=-1)))
    t.add("cg: owned partitions missing at join", cg_heartbeat(
        side, group_id=consumer_group, member_id=ids[1], subscribed_topic_names=(topic,), topic_partitions=None))
    t.add("cg: unknown assignor", cg_heartbeat(side, group_id=consumer_group, member_id=ids[1],
                                               subscribed_topic_names=(topic,), server_assignor="nope"))
    t.add("cg: epoch -2 without instance id", cg_heartbeat(side, group_id=consumer_group, member_id=ids[0],
                                                           member_epoch=-2))
    classic = ClassicMember(t, classic_group, topic)
    classic.join()
    classic.join()
    classic.sync({classic.member_id: b""})
    connect_id = side.call(JOIN_GROUP, 9, **join_fields(side, connect_group, protocol_type="connect")).member_id
    t.add("connect: join", join(side, connect_group, protocol_type="connect", member_id=connect_id))
    t.add("cg: join a classic group of another protocol type", cg_heartbeat(side, group_id=connect_group,
                                                                            member_id=ids[1]))
    t.add("classic: join a consumer group", join(side, consumer_group))
    t.add("classic: other protocol type", join(side, classic_group, protocol_type="connect", member_id=""))
    t.add("classic: session timeout below the minimum",
          join(side, missing, session_timeout=timedelta(milliseconds=500)))
    t.add("classic: session timeout above the maximum", join(side, missing, session_timeout=timedelta(hours=1)))
    t.add("classic: unknown member id", join(side, classic_group, member_id="nobody"))
    t.add("classic: heartbeat, missing group", plain(side.call(HEARTBEAT, 4, group_id=missing, generation_id=1,
                                                                member_id="x", group_instance_id=None)))
    t.add("classic: sync, missing group", plain(side.call(
        SYNC_GROUP, 5, group_id=missing, generation_id=1, member_id="x", group_instance_id=None,
        protocol_type="consumer", protocol_name="range", assignments=())))
    t.add("classic: sync, stale generation", classic.view(side.call(
        SYNC_GROUP, 5, group_id=classic_group, generation_id=0, member_id=classic.member_id, group_instance_id=None,
        protocol_type="consumer", protocol_name="range", assignments=())))
    lt = side.types(LEAVE_GROUP, 5)
    t.add("classic: leave, unknown member", plain(side.call(LEAVE_GROUP, 5, group_id=classic_group, members=(
        lt.MemberIdentity(member_id="nobody", group_instance_id=None, reason=None),))))
    t.add("classic: leave, missing group", plain(side.call(LEAVE_GROUP, 5, group_id=missing, members=(
        lt.MemberIdentity(member_id="nobody", group_instance_id=None, reason=None),))))
    t.add("classic: heartbeat a consumer group", plain(side.call(HEARTBEAT, 4, group_id=consumer_group,
                                                                  generation_id=1, member_id=ids[0],
                                                                  group_instance_id=None)))

    t.add("commit: classic group, unknown member", commit(side, classic_group, topic, {0: 1}, member_id="x", epoch=1))
    t.add("commit: missing group with a generation", commit(side, missing, topic, {0: 1}, member_id="x", epoch=1))
    t.add("fetch: missing group", fetch(side, missing, topic))
    t.add("fetch: consumer group, unknown member", fetch(side, consumer_group, topic, member_id="x", epoch=1))
    t.add("offset delete: missing group", offset_delete(side, missing, topic, range(1)))
    t.add("delete: missing group", delete_groups(side, missing))
    t.add("describe: missing group", describe_groups(side, missing))
    t.add("describe: consumer group via DescribeGroups", {
        k: v for k, v in describe_groups(side, consumer_group).items() if k != "members"})
    t.add("consumer group describe: classic group", describe_consumer_group(side, classic_group))
    t.add("consumer group describe: empty id", describe_consumer_group(side, ""))
    classic.leave()
    a.leave()
    t.add("connect: describe", {k: v for k, v in describe_groups(side, connect_group).items() if k != "members"})
    return t


def test_validation_and_errors(sides, names, topic):
    groups, ids = [names.group(tag) for tag in ("cg", "classic", "connect", "missing")], member_ids(2)
    kafka, kcoord = (validation(Transcript(side), groups, topic, ids) for side in sides)
    assert_same(kafka, kcoord)
    assert kafka["cg: unknown assignor"]["error_code"] == "unsupported_assignor"
