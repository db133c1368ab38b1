"""aiokafka and kafka-python classic groups through the gateway, with the range and
round-robin assignors (client-side assignment: the leader computes it, kcoord only
stores and hands it out in SyncGroup)."""
from __future__ import annotations

import socket

import pytest
from aiokafka.coordinator.assignors.range import RangePartitionAssignor as AioRange
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as AioRoundRobin
from kafka.coordinator.assignors.range import RangePartitionAssignor as KpRange
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as KpRoundRobin

from support.aiokafka_driver import AiokafkaConsumer
from support.kafka_python_driver import KafkaPythonConsumer

from coordinator.protocol.codec import encode_body
from coordinator.protocol.framing import RequestHeader
from coordinator.protocol.unknown_tags import rewrite_tags
from fuzz.mutations import reframe
from support.admin import create_topic
from support.raw_client import call_with as call, decode_response, read_frame, request_types
from classic_scenario import join_grow_leave

OFFSET_FETCH, OFFSET_COMMIT, FIND_COORDINATOR = 9, 8, 10
# kcoord bug: OffsetFetch v8 (multi-group, no member fields yet) → UNKNOWN_SERVER_ERROR.
CLIENTS = {"aiokafka": (AiokafkaConsumer, {"range": AioRange, "roundrobin": AioRoundRobin}),
           "kafka-python": (KafkaPythonConsumer, {"range": KpRange, "roundrobin": KpRoundRobin})}


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
@pytest.mark.parametrize("client", ["aiokafka", "kafka-python"])
def test_join_grow_leave(client, assignor, kcoord, names, ledger, drivers):
    driver_class, assignors = CLIENTS[client]
    topic, group = names.topic(), names.group()

    def member(name: str):
        return drivers.add(driver_class(kcoord.bootstrap, topic, group, member=f"{client}-{name}", ledger=ledger,
                                        partition_assignment_strategy=(assignors[assignor],))).start()

    members = join_grow_leave(kcoord.bootstrap, topic, group, ledger, member)
    assert all(m.events("closed") for m in members)
    # Each member that stayed saw one rebalance per membership change with the assignor chosen.
    assert len(members[1].events("assigned")) >= 3


@pytest.mark.parametrize("version", [8, 9])
def test_offset_fetch_of_a_group_without_offsets(version, kcoord, names):
    """Minimal reproduction of the kafka-python failure, one request per version."""
    types = request_types(OFFSET_FETCH, version)
    member = {"member_id": None, "member_epoch": -1} if version >= 9 else {}
    group = types.OffsetFetchRequestGroup(group_id=names.group(), topics=(
        types.OffsetFetchRequestTopics(name=names.topic(), partition_indexes=(0,)),), **member)
    response = call(kcoord.bootstrap, OFFSET_FETCH, version, groups=(group,), require_stable=False)
    [answer] = response.groups
    assert answer.error_code == 0
    [[partition]] = [t.partitions for t in answer.topics]
    assert (partition.committed_offset, partition.error_code) == (-1, 0)


def _with_unknown_tags(known: frozenset[int], fields: dict[int, bytes]) -> list[tuple[int, bytes]]:
    return sorted([*fields.items(), (max(known, default=-1) + 1, b"\x01"), (10_000, b"newer client")])


def _tagged_call(bootstrap: str, api_key: int, version: int, message) -> object:
    """One round trip of ``message`` with tagged fields kcoord does not know in the request
    header and in every tagged section of the body, as a client newer than kcoord's schemas
    sends them (KIP-482)."""
    body = encode_body(message)
    body, _ = rewrite_tags(type(message), body, 0, len(body), _with_unknown_tags)
    header = RequestHeader(api_key, version, 5, "newer", ((9, b"\x01\x02"),)).encode(2)
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(reframe(header + body))
        frame = read_frame(sock)
    assert frame is not None, "kcoord closed the connection"
    correlation_id, response = decode_response(api_key, version, frame)
    assert correlation_id == 5
    return response


def test_served_requests_with_unknown_tagged_fields_are_answered(kcoord, names):
    """Kafka's readers skip tagged fields they do not know; kcoord answered
    FindCoordinator and OffsetCommit carrying one with an error or a close."""
    topic, group = names.topic(), names.group()
    create_topic(kcoord.bootstrap, topic, 1)
    find = request_types(FIND_COORDINATOR, 4)
    found = _tagged_call(kcoord.bootstrap, FIND_COORDINATOR, 4,
                         find.FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
    assert [(c.key, c.error_code) for c in found.coordinators] == [(group, 0)]
    commit = request_types(OFFSET_COMMIT, 9)
    committed = _tagged_call(kcoord.bootstrap, OFFSET_COMMIT, 9, commit.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(commit.OffsetCommitRequestTopic(name=topic, partitions=(commit.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=7, committed_leader_epoch=-1, committed_metadata="m"),)),)))
    assert [(p.partition_index, p.error_code) for t in committed.topics for p in t.partitions] == [(0, 0)]
    types = request_types(OFFSET_FETCH, 9)
    fetched = call(kcoord.bootstrap, OFFSET_FETCH, 9, require_stable=False, groups=(types.OffsetFetchRequestGroup(
        group_id=group, member_id=None, member_epoch=-1,
        topics=(types.OffsetFetchRequestTopics(name=topic, partition_indexes=(0,)),)),))
    assert [(p.committed_offset, p.metadata) for t in fetched.groups[0].topics for p in t.partitions] == [(7, "m")]
