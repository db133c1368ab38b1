"""The runtime's Kafka-named metrics: rebalances counted by group type, and committed offsets,
from the records a result writes (a steady heartbeat writes none, so it is never counted)."""
from __future__ import annotations

import uuid

from prometheus_client import REGISTRY

from coordinator.group import record_helpers as rh
from coordinator.group.classic.group import ClassicGroup, ClassicGroupMember, ClassicGroupState
from coordinator.runtime.shard_runtime import _count_records


def rebalances(kind: str) -> float:
    return REGISTRY.get_sample_value("kcoord_group_rebalances_total", {"type": kind}) or 0.0


def test_a_new_group_epoch_and_a_classic_generation_with_members_count_as_rebalances():
    consumer, classic = rebalances("consumer"), rebalances("classic")
    group = ClassicGroup("g", ClassicGroupState.STABLE)
    group.protocol_type, group.protocol_name, group.generation_id = "consumer", "range", 3
    group.add(ClassicGroupMember(member_id="m", group_instance_id=None, client_id="c", client_host="h",
                                 rebalance_timeout_ms=1000, session_timeout_ms=1000, protocol_type="consumer",
                                 supported_protocols=[("range", b"")]))
    _count_records([rh.group_epoch_record("g", 4, 0), rh.group_metadata_record(group, {"m": b""})])
    assert (rebalances("consumer"), rebalances("classic")) == (consumer + 1, classic + 1)
    _count_records([rh.group_epoch_tombstone("g"), rh.group_metadata_tombstone("g")])   # deletions
    assert (rebalances("consumer"), rebalances("classic")) == (consumer + 1, classic + 1)


def commits() -> float:
    return REGISTRY.get_sample_value("kcoord_offset_commits_total") or 0.0


def test_each_offset_commit_record_counts_once_and_tombstones_do_not():
    before = commits()
    _count_records([rh.offset_commit_record("g", "t", p, offset=5, leader_epoch=-1, metadata="", commit_timestamp=1)
                    for p in range(4)])
    assert commits() == before + 4
    _count_records([rh.offset_tombstone("g", "t", 0), rh.group_epoch_tombstone("g")])  # expiry, deletion
    assert commits() == before + 4


def test_a_durable_commits_records_count_as_their_partitions():
    """offset_commit's records (records.codec.EncodedRecords) are counted by their number: one
    per accepted partition, whether their bytes were made in its loop or not."""
    from coordinator.group.image import MetadataImage, TopicImage
    from coordinator.group.kio_util import schema
    from coordinator.group.shard import GroupCoordinatorShard, RequestContext
    from records.codec import EncodedRecords

    image = MetadataImage.of([TopicImage(topic_id=uuid.uuid4(), name="t", num_partitions=3)])
    shard = GroupCoordinatorShard(0, image=image)
    mod = schema("offset_commit", 9, "request")
    for metadata in ("", "md"):
        req = mod.OffsetCommitRequest(
            group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=(mod.OffsetCommitRequestTopic(name="t", partitions=tuple(
                mod.OffsetCommitRequestPartition(partition_index=p, committed_offset=5, committed_leader_epoch=-1,
                                                 committed_metadata=metadata) for p in (0, 2, 7))),))
        result = shard.offset_commit(RequestContext(api_version=9, client_id="c", client_host="/h"), req, 1)
        assert isinstance(result.records, EncodedRecords) and len(result.records) == 2   # partition 7: refused
        before = commits()
        _count_records(result.records)
        assert commits() == before + 2
