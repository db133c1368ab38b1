"""What a group coordinator reports about groups, through the same raw requests sent to Apache
Kafka and to `kcoord serve`: ListGroups v5, OffsetFetch v9, DescribeGroups v5 and
ConsumerGroupDescribe v1, reduced to comparable plain values.

Nothing coordinator-specific needs normalising in these answers (no coordinator host/port;
client hosts come from the log itself); member lists are sorted, assignments are sets.
"""
from __future__ import annotations

from coordinator.group.kio_util import schema
from support.raw_client import call_with as call

LIST_GROUPS, OFFSET_FETCH, DESCRIBE_GROUPS, CONSUMER_GROUP_DESCRIBE = 16, 9, 15, 69


def list_groups(address) -> dict[str, tuple]:
    resp = call(address, LIST_GROUPS, 5, states_filter=(), types_filter=())
    assert resp.error_code == 0
    return {g.group_id: (g.group_type, g.group_state, g.protocol_type) for g in resp.groups}


def offsets(address, groups) -> dict[str, dict]:
    """group -> (error code, {(topic, partition): (offset, leader epoch, metadata)})."""
    req = schema("offset_fetch", 9, "request")
    resp = call(address, OFFSET_FETCH, 9, require_stable=True, groups=tuple(
        req.OffsetFetchRequestGroup(group_id=g, member_id=None, member_epoch=-1, topics=None)
        for g in groups))
    return {g.group_id: (g.error_code, {
        (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata)
        for t in g.topics for p in t.partitions if p.error_code == 0})
        for g in resp.groups}


def describe(address, groups) -> dict[str, tuple]:
    resp = call(address, DESCRIBE_GROUPS, 5, groups=tuple(groups), include_authorized_operations=False)
    return {g.group_id: (g.error_code, g.group_state, g.protocol_type, g.protocol_data, sorted(
        (m.member_id, m.group_instance_id, m.client_id, m.client_host, bytes(m.member_metadata),
         bytes(m.member_assignment)) for m in g.members)) for g in resp.groups}


def _tps(assignment) -> list:
    return sorted((str(t.topic_id), t.topic_name, tuple(sorted(t.partitions)))
                  for t in assignment.topic_partitions)


def consumer_describe(address, groups) -> dict[str, tuple]:
    resp = call(address, CONSUMER_GROUP_DESCRIBE, 1, group_ids=tuple(groups),
                include_authorized_operations=False)
    return {g.group_id: (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch,
                         g.assignor_name, sorted(
        (m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
         tuple(sorted(m.subscribed_topic_names)), m.subscribed_topic_regex, _tps(m.assignment),
         _tps(m.target_assignment), m.member_type) for m in g.members))
        for g in resp.groups}


def view(address, groups, consumer_groups) -> dict:
    return {"list": list_groups(address), "offsets": offsets(address, groups),
            "describe": describe(address, groups),
            "consumer": consumer_describe(address, consumer_groups)}


def settled(v: dict, in_flight=()) -> bool:
    """No rebalance in flight: classic groups Stable or Empty, consumer groups with every
    member at its target assignment (but the groups `in_flight`, which stay Reconciling)."""
    for err, state, *_rest in v["describe"].values():
        if err == 0 and state not in ("Stable", "Empty", "Dead"):
            return False
    for gid, (err, state, epoch, aepoch, _a, members) in v["consumer"].items():
        if gid in in_flight:
            if state != "Reconciling":
                return False
            continue
        # An emptied group keeps the epoch the last leave bumped, without a new assignment.
        if err == 0 and (state not in ("Stable", "Empty") or (members and epoch != aepoch)
                         or any(m[8] != m[9] for m in members)):
            return False
    return True
