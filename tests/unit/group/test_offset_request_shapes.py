"""OffsetCommit (v2-v10) and the single-group OffsetFetch (v1-v7) reach offsets/ in one shape each
(coordinator/group/offsets/requests.py), with Kafka's default for a field an old version lacks
and the request's own topics, uncopied; every version commits and reads back through the shard."""
from __future__ import annotations

from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.context import RequestContext
from coordinator.group.kio_util import schema
from coordinator.group.offsets.requests import OffsetDelete, OffsetFetch, fetch_answer, offset_commit_shape

from .context import ShardContext, topic

FOO = topic("foo", 2)


def commit_request(version: int, offset: int = 7):
    mod = schema("offset_commit", version, "request")
    part = mod.OffsetCommitRequestPartition(partition_index=1, committed_offset=offset, committed_leader_epoch=3,
                                            committed_metadata="m") if version >= 6 else \
        mod.OffsetCommitRequestPartition(partition_index=1, committed_offset=offset, committed_metadata="m")
    t = mod.OffsetCommitRequestTopic(topic_id=FOO.topic_id, partitions=(part,)) if version >= 10 else \
        mod.OffsetCommitRequestTopic(name="foo", partitions=(part,))
    fields = dict(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=(t,))
    if version <= 4:
        fields["retention_time"] = timedelta(milliseconds=60_000)
    if version >= 7:
        fields["group_instance_id"] = "static-1"
    return mod.OffsetCommitRequest(**fields)


@pytest.mark.parametrize("version", range(2, 11))
def test_the_commit_shape_takes_kafkas_defaults_and_keeps_the_topics(version):
    req = commit_request(version)
    shape = offset_commit_shape(req)
    assert shape.topics is req.topics                      # no copy of what grows with the request
    assert shape.retention_ms == (60_000 if version <= 4 else -1)
    assert shape.group_instance_id == ("static-1" if version >= 7 else None)
    assert shape.by_id is (version >= 10) and shape.leader_epochs is (version >= 6)


@pytest.mark.parametrize("version", range(2, 11))
def test_each_commit_version_is_written_and_read_back(version):
    c = ShardContext(FOO)
    resp = c.call("offset_commit", commit_request(version, offset=40 + version), version)
    assert [p.error_code for t in resp.topics for p in t.partitions] == [ErrorCode.none]
    stored = c.shard.offsets.get("g", "foo", 1)
    assert stored.offset == 40 + version and stored.leader_epoch == (3 if version >= 6 else -1)
    assert (stored.expire_timestamp != -1) is (version <= 4)    # a v2-v4 retention time sets an expiry


@pytest.mark.parametrize("version", range(1, 8))
def test_the_single_group_fetch_shape(version):
    mod = schema("offset_fetch", version, "request")
    fields = dict(group_id="g", topics=(mod.OffsetFetchRequestTopic(name="foo", partition_indexes=(1,)),))
    if version >= 7:
        fields["require_stable"] = True
    shape = OffsetFetch(mod.OffsetFetchRequest(**fields))
    assert shape.require_stable is (version >= 7) and shape.topics[0].name == "foo"
    c = ShardContext(FOO)
    c.call("offset_commit", commit_request(9, offset=5), 9)
    answer = c.shard.offset_fetch(RequestContext(api_version=version), mod.OffsetFetchRequest(**fields), c.now_ms)
    assert answer.response.topics[0].partitions[0].committed_offset == 5


@pytest.mark.parametrize("version", range(2, 11))
def test_the_commit_shape_carries_what_the_version_changes_in_the_answer(version):
    shape = offset_commit_shape(commit_request(version))
    assert shape.group_id_not_found is (version >= 9)
    assert shape.answer.response is schema("offset_commit", version).OffsetCommitResponse
    assert shape.answer.has_throttle is (version >= 3)


@pytest.mark.parametrize("version", range(1, 11))
def test_the_fetch_answer_of_each_version(version):
    answer = fetch_answer(version)
    mod = schema("offset_fetch", version)
    assert answer.response_schema is mod and answer.by_id is (version >= 10)
    assert answer.topic is (mod.OffsetFetchResponseTopics if version >= 8 else mod.OffsetFetchResponseTopic)


def test_the_offset_delete_shape_answers_in_its_version():
    mod = schema("offset_delete", 0, "request")
    req = mod.OffsetDeleteRequest(group_id="nope", topics=())
    shape = OffsetDelete(req)
    assert shape.response_schema is schema("offset_delete", 0) and shape.group_id == "nope"
    answer = ShardContext(FOO).call("offset_delete", req, 0)
    assert type(answer) is schema("offset_delete", 0).OffsetDeleteResponse
    assert answer.error_code == ErrorCode.group_id_not_found
