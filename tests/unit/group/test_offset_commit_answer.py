"""The OffsetCommit answer is built from its version's kio classes directly, and accepted
partitions' answers are shared (frozen) objects held in a bounded table: a client committing
to a topic with many partitions cannot grow it past its bound."""
from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.group.kio_util import schema
from coordinator.group.offsets import ops
from coordinator.group.offsets.requests import commit_answer

from .context import ShardContext, topic

WIDE = topic("wide", ops._ACCEPTED_MAX + 50)


def _commit(partitions, metadata: str = ""):
    mod = schema("offset_commit", 9, "request")
    parts = tuple(mod.OffsetCommitRequestPartition(partition_index=p, committed_offset=5, committed_leader_epoch=-1,
                                                   committed_metadata=metadata) for p in partitions)
    return mod.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                   group_instance_id=None,
                                   topics=(mod.OffsetCommitRequestTopic(name="wide", partitions=parts),))


def test_accepted_answers_are_shared_and_bounded():
    c = ShardContext(WIDE)
    accepted = commit_answer(9).accepted
    accepted.clear()
    resp = c.call("offset_commit", _commit(range(WIDE.num_partitions)), 9)
    (t,) = resp.topics
    assert [p.partition_index for p in t.partitions] == list(range(WIDE.num_partitions))
    assert {p.error_code for p in t.partitions} == {ErrorCode.none}
    assert len(accepted) == ops._ACCEPTED_MAX
    again = c.call("offset_commit", _commit([3]), 9)
    assert again.topics[0].partitions[0] is t.partitions[3]


def test_refused_partitions_keep_their_own_codes_beside_accepted_ones():
    c = ShardContext(WIDE)
    resp = c.call("offset_commit", _commit([1, WIDE.num_partitions, 2]), 9)
    assert [(p.partition_index, p.error_code) for p in resp.topics[0].partitions] == [
        (1, ErrorCode.none), (WIDE.num_partitions, ErrorCode.unknown_topic_or_partition), (2, ErrorCode.none)]
    too_long = c.call("offset_commit", _commit([1], metadata="x" * 5000), 9)
    assert too_long.topics[0].partitions[0].error_code == ErrorCode.offset_metadata_too_large
    # Kafka counts UTF-16 units: 2,048 emoji are exactly the limit, one more is over it
    at_limit = c.call("offset_commit", _commit([1], metadata="\U0001F600" * 2048), 9)
    assert at_limit.topics[0].partitions[0].error_code == ErrorCode.none
    over = c.call("offset_commit", _commit([1], metadata="\U0001F600" * 2049), 9)
    assert over.topics[0].partitions[0].error_code == ErrorCode.offset_metadata_too_large
    # one UTF-16 unit per character: 4,096 are the limit, one more is over it
    ascii_at_limit = c.call("offset_commit", _commit([1], metadata="x" * 4096), 9)
    assert ascii_at_limit.topics[0].partitions[0].error_code == ErrorCode.none
    ascii_over = c.call("offset_commit", _commit([1], metadata="x" * 4097), 9)
    assert ascii_over.topics[0].partitions[0].error_code == ErrorCode.offset_metadata_too_large


def test_all_accepted_answers_are_shared_per_topic_and_partitions_and_bounded():
    c = ShardContext(WIDE)
    shared = commit_answer(9).accepted_responses
    shared.clear()
    first = c.call("offset_commit", _commit([1, 2, 3]), 9)
    assert c.call("offset_commit", _commit([1, 2, 3]), 9) is first          # the same answer object
    assert c.call("offset_commit", _commit([1, 2]), 9) is not first          # other partitions: another
    assert [p.partition_index for p in c.call("offset_commit", _commit([3, 1]), 9).topics[0].partitions] == [3, 1]
    # a refused partition: built for this request, never shared
    mixed = c.call("offset_commit", _commit([1, WIDE.num_partitions]), 9)
    assert mixed is not c.call("offset_commit", _commit([1, WIDE.num_partitions]), 9)
    # many partitions in one commit: answered, not kept
    wide = list(range(ops._SHARED_RESPONSE_PARTITIONS + 1))
    assert len(c.call("offset_commit", _commit(wide), 9).topics[0].partitions) == len(wide)
    assert all(len(indices) <= ops._SHARED_RESPONSE_PARTITIONS for _, indices in shared)
    # a client naming ever new partition sets cannot grow it past its bound
    for i in range(ops._ACCEPTED_MAX + 20):
        c.call("offset_commit", _commit([i % WIDE.num_partitions, (i + 1) % WIDE.num_partitions]), 9)
        assert len(shared) <= ops._ACCEPTED_MAX
