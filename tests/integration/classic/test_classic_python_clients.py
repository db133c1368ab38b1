"""aiokafka and kafka-python classic groups through the gateway, with the range and
round-robin assignors (client-side assignment: the leader computes it, kcoord only
stores and hands it out in SyncGroup)."""
from __future__ import annotations

import pytest
from aiokafka.coordinator.assignors.range import RangePartitionAssignor as AioRange
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as AioRoundRobin
from kafka.coordinator.assignors.range import RangePartitionAssignor as KpRange
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as KpRoundRobin

from support.aiokafka_driver import AiokafkaConsumer
from support.kafka_python_driver import KafkaPythonConsumer

from support.raw_client import call_with as call, request_types
from classic_scenario import join_grow_leave

OFFSET_FETCH = 9
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
