"""TxnOffsetCommit v6 (KIP-1319, Kafka 4.4) on the sans-IO shard: topics named by id and by id
only, UNKNOWN_TOPIC_ID for an id the metadata image cannot name, and the errors v6 answers as
such (GROUP_ID_NOT_FOUND, STALE_MEMBER_EPOCH) where v5 and below answer ILLEGAL_GENERATION.
The handler reads one shape at every version: a commit by id writes exactly what the same
commit by name writes."""
from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from coordinator.group.offsets.txn_commit import TxnOffsetWrite, txn_offset_commit
from coordinator.protocol import error_responses
from coordinator.protocol.messages import schema

from .test_consumer_heartbeat import fast
from .test_txn_offset_commit import BAR, FOO, TxnShardContext, _consumer_group_with_revocation, errors

UNKNOWN_ID = uuid.UUID(int=0xDEAD)


def v6_request(group: str, offsets: dict, *, generation: int = -1, member: str = "", pid: int = 1000,
               epoch: int = 0, txn_id: str = "tx", metadata: str = "m"):
    """A TxnOffsetCommit v6 body; ``offsets`` is {topic id: {partition: offset}}."""
    mod = schema("txn_offset_commit", 6, "request")
    topics = tuple(mod.TxnOffsetCommitRequestTopic(topic_id=tid, partitions=tuple(
        mod.TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_leader_epoch=7,
                                            committed_metadata=metadata) for p, o in parts.items()))
        for tid, parts in offsets.items())
    return mod.TxnOffsetCommitRequest(transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch,
                                      generation_id_or_member_epoch=generation, member_id=member,
                                      group_instance_id=None, topics=topics)


def commit_v6(c: TxnShardContext, group: str, offsets: dict, **kw) -> TxnOffsetWrite:
    return txn_offset_commit(c.shard, c.ctx(6), v6_request(group, offsets, **kw), c.now_ms)


def by_id(write: TxnOffsetWrite) -> dict:
    return {(t.topic_id, p.partition_index): p.error_code for t in write.result.response.topics for p in t.partitions}


def test_v6_commits_by_topic_id_and_answers_by_topic_id():
    c = TxnShardContext(FOO, BAR)
    w = commit_v6(c, "g", {FOO.topic_id: {0: 10, 1: 11}, BAR.topic_id: {1: 3}}, pid=7, epoch=2)
    assert by_id(w) == {(FOO.topic_id, 0): ErrorCode.none, (FOO.topic_id, 1): ErrorCode.none,
                        (BAR.topic_id, 1): ErrorCode.none}
    response = w.result.response
    assert type(response).__version__ == 6 and not hasattr(response.topics[0], "name")
    # The records name the topic and carry its id, as a commit by name writes them.
    assert [(r.key.topic, r.key.partition, r.value.topic_id) for r in w.result.records] == [
        ("foo", 0, FOO.topic_id), ("foo", 1, FOO.topic_id), ("bar", 1, BAR.topic_id)]


def test_an_unknown_topic_id_fails_alone_and_a_missing_partition_of_a_known_id_is_unknown_partition():
    c = TxnShardContext(FOO)
    w = commit_v6(c, "g", {FOO.topic_id: {0: 1, 9: 1}, UNKNOWN_ID: {0: 1, 1: 1}})
    # KafkaApis: an id its metadata cache cannot name is UNKNOWN_TOPIC_ID; a known topic
    # without that partition is UNKNOWN_TOPIC_OR_PARTITION.
    assert by_id(w) == {(FOO.topic_id, 0): ErrorCode.none, (FOO.topic_id, 9): ErrorCode.unknown_topic_or_partition,
                        (UNKNOWN_ID, 0): ErrorCode.unknown_topic_id, (UNKNOWN_ID, 1): ErrorCode.unknown_topic_id}
    assert [(r.key.topic, r.key.partition) for r in w.result.records] == [("foo", 0)]
    # Nothing known left: the group is not checked (no GROUP_ID_NOT_FOUND for a generation).
    w = commit_v6(c, "h", {UNKNOWN_ID: {0: 1}}, generation=5, member="m")
    assert set(by_id(w).values()) == {ErrorCode.unknown_topic_id}


def test_one_shape_a_commit_by_id_writes_what_the_same_commit_by_name_writes():
    by_name_ctx, by_id_ctx = TxnShardContext(FOO), TxnShardContext(FOO)
    named = by_name_ctx.txn_commit("g", {"foo": {2: 5, 3: 6}}, version=5, pid=9, epoch=1)
    numbered = commit_v6(by_id_ctx, "g", {FOO.topic_id: {2: 5, 3: 6}}, pid=9, epoch=1)
    assert [(r.key, r.value) for r in named.result.records] == [(r.key, r.value) for r in numbered.result.records]
    assert set(errors(named).values()) == set(by_id(numbered).values()) == {ErrorCode.none}


def test_an_unknown_group_with_a_generation_is_group_id_not_found_at_v6_and_illegal_generation_below():
    c = TxnShardContext(FOO)
    assert set(by_id(commit_v6(c, "g", {FOO.topic_id: {0: 1}}, generation=4, member="m")).values()) == \
        {ErrorCode.group_id_not_found}
    for version in (3, 4, 5):
        w = c.txn_commit("g", {"foo": {0: 1}}, generation=4, member="m", version=version)
        assert set(errors(w).values()) == {ErrorCode.illegal_generation}, version
    assert "g" not in c.shard.groups


def test_a_stale_member_epoch_is_stale_member_epoch_at_v6_and_illegal_generation_below():
    c = TxnShardContext(FOO, config=fast())
    kept, revoked = _consumer_group_with_revocation(c)      # m1 at epoch 3
    # A future epoch: refused for the whole group.
    assert set(by_id(commit_v6(c, "g", {FOO.topic_id: {kept[0]: 1}}, generation=4, member="m1")).values()) == \
        {ErrorCode.stale_member_epoch}
    assert set(errors(c.txn_commit("g", {"foo": {kept[0]: 1}}, generation=4, member="m1", version=5)).values()) == \
        {ErrorCode.illegal_generation}
    # An older epoch for a partition the member lost (KIP-1251's per-partition check).
    w = commit_v6(c, "g", {FOO.topic_id: {kept[0]: 1, revoked[0]: 1}}, generation=2, member="m1")
    assert set(by_id(w).values()) == {ErrorCode.stale_member_epoch} and not w.result.records
    w = c.txn_commit("g", {"foo": {kept[0]: 1, revoked[0]: 1}}, generation=2, member="m1", version=5)
    assert set(errors(w).values()) == {ErrorCode.illegal_generation} and not w.result.records
    # v6 reads the member epoch from GenerationIdOrMemberEpoch: the current epoch commits.
    assert set(by_id(commit_v6(c, "g", {FOO.topic_id: {revoked[0]: 2}}, generation=3, member="m1")).values()) == \
        {ErrorCode.none}


def test_the_error_response_names_topics_by_id_at_v6_and_maps_codes_per_version():
    req = v6_request("g", {FOO.topic_id: {0: 1, 1: 1}, UNKNOWN_ID: {0: 1}})
    response = error_responses.txn_offset_commit(6, _Error(ErrorCode.not_coordinator), req)
    assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in response.topics] == [
        (FOO.topic_id, [ErrorCode.not_coordinator] * 2), (UNKNOWN_ID, [ErrorCode.not_coordinator])]
    code = error_responses.txn_offset_commit_code
    assert code(6, ErrorCode.stale_member_epoch) is ErrorCode.stale_member_epoch
    assert code(5, ErrorCode.stale_member_epoch) is ErrorCode.illegal_generation
    assert code(5, ErrorCode.group_id_not_found) is ErrorCode.illegal_generation
    assert code(4, ErrorCode.transaction_abortable) is ErrorCode.transaction_abortable
    assert code(3, ErrorCode.transaction_abortable) is ErrorCode.invalid_txn_state
    # KafkaApis answers v0-1 COORDINATOR_NOT_AVAILABLE for a loading coordinator.
    assert code(1, ErrorCode.coordinator_load_in_progress) is ErrorCode.coordinator_not_available
    assert code(2, ErrorCode.coordinator_load_in_progress) is ErrorCode.coordinator_load_in_progress


class _Error:
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        self.code, self.message = code, message


def test_without_topic_ids_the_listing_stops_below_the_first_version_naming_topics_by_id():
    from coordinator.protocol import apis
    from coordinator.protocol.api_table import CORE_TABLE, without_topic_ids
    listed = {apis.TXN_OFFSET_COMMIT: (0, 6), apis.OFFSET_COMMIT: (2, 10), apis.OFFSET_FETCH: (1, 10),
              apis.DELETE_GROUPS: (0, 3), 10_000: (10, 12)}
    assert without_topic_ids(listed, CORE_TABLE) == {
        apis.TXN_OFFSET_COMMIT: (0, 5), apis.OFFSET_COMMIT: (2, 9), apis.OFFSET_FETCH: (1, 9),
        apis.DELETE_GROUPS: (0, 3), 10_000: (10, 12)}
    # A listing that already stops below is left as it is; one made only of such versions goes.
    assert without_topic_ids({apis.TXN_OFFSET_COMMIT: (0, 5)}, CORE_TABLE) == {apis.TXN_OFFSET_COMMIT: (0, 5)}
    assert without_topic_ids({apis.TXN_OFFSET_COMMIT: (6, 6)}, CORE_TABLE) == {}


def test_one_shape_fields_older_versions_lack_read_as_kafka_assumes_them():
    c = TxnShardContext(FOO)
    # v0-1: no leader epoch (-1 in the record); v0-2: no generation, member or instance (the
    # anonymous commit, accepted by a missing group); v2+ carry the leader epoch (7 here).
    for version, epoch in ((0, -1), (1, -1), (2, 7), (5, 7)):
        w = c.txn_commit(f"g{version}", {"foo": {0: 1}}, version=version)
        assert set(errors(w).values()) == {ErrorCode.none}, version
        assert [r.value.leader_epoch for r in w.result.records] == [epoch], version
    assert [r.value.leader_epoch for r in commit_v6(c, "g6", {FOO.topic_id: {0: 1}}).result.records] == [7]
