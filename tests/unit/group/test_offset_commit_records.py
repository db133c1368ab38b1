"""A fresh OffsetCommit's records, applied as the runtime applies them (`shard.apply`, whose
`Replayer.replay_records` stores offset commits without a call per record), give exactly the
state that a reload of the written bytes gives, record by record and through the bulk
loader: restart = reload = the same state. And `replay_records` equals `replay` of each record
on generated logs of every record type."""
from __future__ import annotations

from datetime import timedelta

import pytest

from coordinator.group.bulk_replay import BulkReplay
from coordinator.group.kio_util import schema
from coordinator.group.result import Result
from coordinator.group.shard import GroupCoordinatorShard, RequestContext
from coordinator.runtime.shard_runtime import serialize_records
from ops.generator import GeneratorSpec
from records import CoordinatorRecord, GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, decode_record

from .context import topic
from .test_bulk_replay import _batches, _state

FOO, BAR = topic("foo", 6), topic("bar", 3)


def _request(version: int, group: str, offsets: dict, metadata: str = "", retention_ms: int = -1, by_id=None):
    mod = schema("offset_commit", version, "request")
    topics = []
    for name, parts in offsets.items():
        ps = tuple(mod.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_leader_epoch=7,
                                                   committed_metadata=metadata)
                   if version >= 6 else
                   mod.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata=metadata)
                   for p, o in parts.items())
        topics.append(mod.OffsetCommitRequestTopic(topic_id=by_id[name], partitions=ps) if by_id else
                      mod.OffsetCommitRequestTopic(name=name, partitions=ps))
    kw = dict(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=tuple(topics))
    if version >= 7:
        kw["group_instance_id"] = None
    if version <= 4:
        kw["retention_time"] = timedelta(milliseconds=retention_ms)
    return mod.OffsetCommitRequest(**kw)


def test_applied_commits_equal_their_reload():
    from coordinator.group.image import MetadataImage

    image = MetadataImage.of([FOO, BAR])
    live = GroupCoordinatorShard(0, image=image)
    log: list[tuple[bytes, bytes | None]] = []
    now = 1_700_000_000_000
    ids = {"foo": FOO.topic_id, "bar": BAR.topic_id}
    requests = [
        (9, _request(9, "g1", {"foo": {0: 5, 1: 6, 5: 9}, "bar": {2: 1}})),
        (9, _request(9, "g1", {"foo": {1: 60}})),                              # a newer commit replaces
        (9, _request(9, "g2", {"foo": {0: 3}}, metadata="checkpoint ü")),      # metadata: the generic encoder
        (2, _request(2, "g3", {"bar": {0: 11}}, retention_ms=60_000)),         # an expire time: version 1
        (5, _request(5, "g3", {"bar": {1: 12}})),                              # no leader epoch before v6
        (10, _request(10, "g4", {"foo": {4: 44}, "bar": {0: 4}}, by_id=ids)),  # topics by id
        (9, _request(9, "g1", {"foo": {9: 1}, "bar": {0: 2}})),                # one partition out of range
    ]
    for i, (version, req) in enumerate(requests):
        result = live.offset_commit(RequestContext(api_version=version, client_id="c", client_host="/h"), req,
                                    now + i)
        live.apply(result, len(log))
        log.extend(serialize_records(result.records))
    assert live.offsets.get("g1", "foo", 1).offset == 60 and live.offsets.get("g1", "foo", 1).record_offset == 4
    assert live.offsets.get("g2", "foo", 0).metadata == "checkpoint ü"
    assert live.offsets.get("g3", "bar", 0).expire_timestamp == now + 3 + 60_000
    assert live.offsets.get("g1", "bar", 0).offset == 2 and live.offsets.get("g1", "foo", 9) is None
    assert set(live.groups) == {"g1", "g2", "g3", "g4"}

    by_record = GroupCoordinatorShard(0, image=image)
    bulk = BulkReplay(GroupCoordinatorShard(0, image=image))
    for offset, (key, value) in enumerate(log):
        by_record.replay(decode_record(key, value), offset)
        bulk.add(key, value, offset)
    bulk.flush()
    assert _state(live) == _state(by_record) == _state(bulk.shard)
    assert live.offsets.offsets == by_record.offsets.offsets     # the entries themselves, record offsets included


@pytest.mark.parametrize(("version", "retention_ms", "by_id"), [(9, -1, False), (10, -1, True), (5, -1, False),
                                                                 (2, 60_000, False), (2, -1, False)])
def test_a_commits_records_are_the_record_helpers_records(version, retention_ms, by_id):
    """offset_commit builds its records in its loop; they are what record_helpers'
    offset_commit_record builds for the same commit (key, value, version), with the shared key."""
    from coordinator.group import record_helpers as rh
    from coordinator.group.image import MetadataImage
    from records.codec import OFFSET_COMMIT_KEYS

    shard = GroupCoordinatorShard(0, image=MetadataImage.of([FOO, BAR]))
    ids = {"foo": FOO.topic_id, "bar": BAR.topic_id} if by_id else None
    req = _request(version, "g", {"foo": {0: 5, 3: 6}, "bar": {2: 1}}, metadata="m", retention_ms=retention_ms,
                   by_id=ids)
    now = 1_700_000_000_000
    result = shard.offset_commit(RequestContext(api_version=version, client_id="c", client_host="/h"), req, now)
    expire = now + retention_ms if retention_ms != -1 else -1
    epoch = 7 if version >= 6 else -1
    expected = [rh.offset_commit_record("g", t.name, p, o, epoch, "m", now, expire, t.topic_id)
                for t, p, o in ((FOO, 0, 5), (FOO, 3, 6), (BAR, 2, 1))]
    assert result.records == expected
    assert [r.value_version for r in result.records] == [1 if retention_ms != -1 else 4] * 3
    assert all(r.key is OFFSET_COMMIT_KEYS[(r.key.group, r.key.topic)][r.key.partition] for r in result.records)


@pytest.mark.parametrize("seed", [5, 13])
def test_replay_records_equals_replay_of_each_record(seed):
    """Generated logs (both group protocols, conversions, deletions, tombstones, unknown
    types), without transactions: `apply` of results of a few records each against `replay`
    record by record."""
    spec = GeneratorSpec(records=6000, groups=20, seed=seed, partitions=1, transactional_fraction=0.0,
                         cycle_fraction=0.3)
    one_by_one, applied = GroupCoordinatorShard(0), GroupCoordinatorShard(0)
    pending: list = []
    base = 0
    commits = 0
    for lb in _batches(spec):
        if lb.batch.is_control_batch:
            continue
        for r in lb.batch.records:
            record = decode_record(r.key, r.value)
            one_by_one.replay(record, r.offset)
            if not pending:
                base = r.offset
            if r.offset != base + len(pending) or len(pending) == 7:
                applied.apply(Result(records=pending), base)
                pending, base = [], r.offset
            pending.append(record)
            commits += isinstance(record, CoordinatorRecord) and record.key.__class__ is OffsetCommitKey \
                and record.value.__class__ is OffsetCommitValue
    applied.apply(Result(records=pending), base)
    assert commits > 1000
    assert _state(applied) == _state(one_by_one)
    assert applied.offsets.offsets == one_by_one.offsets.offsets


def test_a_result_not_replayed_changes_nothing():
    shard = GroupCoordinatorShard(0)
    record = CoordinatorRecord(OffsetCommitKey("g", "t", 0), OffsetCommitValue(offset=1), 4)
    shard.apply(Result(records=[record], replay=False), 0)
    assert not shard.offsets.offsets and not shard.groups
    shard.apply(Result(records=[record]))
    assert shard.offsets.get("g", "t", 0).record_offset == -1 and "g" in shard.groups


@pytest.mark.parametrize("base", [-1, 0, 10])
def test_each_record_is_replayed_at_its_own_offset(base):
    """Record i of an applied result is at `base` + i, every one at -1 when the base is not
    known, a record that is not a commit counted in between."""
    records = [CoordinatorRecord(OffsetCommitKey("g", "t", p), OffsetCommitValue(offset=p), 4) for p in range(3)]
    records.insert(2, CoordinatorRecord(GroupMetadataKey("other"), None, 0))
    shard = GroupCoordinatorShard(0)
    shard.apply(Result(records=records), base)
    expected = [-1, -1, -1] if base == -1 else [base, base + 1, base + 3]
    assert [shard.offsets.get("g", "t", p).record_offset for p in range(3)] == expected


@pytest.mark.parametrize("metadata", [None, ""])
def test_a_null_or_empty_metadata_is_written_empty(metadata):
    """A partition's metadata is nullable on the wire: a null one is written, as an empty
    one, as the empty string (Kafka's `OffsetAndMetadata` of a null metadata)."""
    from coordinator.group import record_helpers as rh
    from coordinator.group.image import MetadataImage

    shard = GroupCoordinatorShard(0, image=MetadataImage.of([FOO]))
    now = 1_700_000_000_000
    result = shard.offset_commit(RequestContext(api_version=9, client_id="c", client_host="/h"),
                                 _request(9, "g", {"foo": {1: 5}}, metadata=metadata), now)
    assert result.records == [rh.offset_commit_record("g", "foo", 1, 5, 7, "", now, -1, FOO.topic_id)]
    assert result.records[0].value.metadata == ""


@pytest.mark.parametrize(("version", "metadata", "retention_ms", "by_id", "packed"), [
    (9, "", -1, False, True), (9, None, -1, False, True), (10, "", -1, True, True), (5, "", -1, False, True),
    (9, "m", -1, False, False),        # metadata: the codec encodes the records
    (2, "", 60_000, False, False),     # version 1 (an expire time): the codec too
])
def test_a_commits_bytes_made_in_its_loop_are_the_codecs(version, metadata, retention_ms, by_id, packed):
    """offset_commit makes its records' bytes as it builds them (records.codec.EncodedRecords),
    for version 4 values without metadata: the runtime's serialize returns those, and they are
    the codec's bytes of the same records, one by one; any other commit is encoded by the codec."""
    from coordinator.group.image import MetadataImage
    from records.codec import EncodedRecords, encode_key, encode_value

    shard = GroupCoordinatorShard(0, image=MetadataImage.of([FOO, BAR]))
    ids = {"foo": FOO.topic_id, "bar": BAR.topic_id, "nope": FOO.topic_id} if by_id else None
    # An unknown topic's and an out-of-range partition's refusals have no record.
    offsets = {"foo": {0: 5, 3: 2**40, 9: 1}, "bar": {2: 0}} if by_id else {"foo": {0: 5, 3: 2**40, 9: 1},
                                                                          "bar": {2: 0}, "nope": {0: 1}}
    req = _request(version, "g", offsets, metadata=metadata, retention_ms=retention_ms, by_id=ids)
    result = shard.offset_commit(RequestContext(api_version=version, client_id="c", client_host="/h"), req,
                                 1_700_000_000_000)
    assert len(result.records) == 3
    assert isinstance(result.records, EncodedRecords) and (result.records.encoded is not None) is packed
    codec = [(encode_key(r.key), encode_value(r.value, r.value_version)) for r in result.records]
    assert serialize_records(result.records) == serialize_records(list(result.records)) == codec


def test_a_commit_with_a_field_out_of_range_is_refused_by_the_codec_as_before():
    """A value the packed shape cannot hold (here an offset past int64, which no decoder gives)
    leaves the bytes to the codec, which refuses it with its own error."""
    from coordinator.gateway import commit_decode
    from coordinator.group.image import MetadataImage
    from records.types import RecordEncodeError

    shard = GroupCoordinatorShard(0, image=MetadataImage.of([FOO]))
    request = commit_decode.decode(_frame_of(_request(9, "g", {"foo": {0: 5, 1: 6}})), 2, 9)[1]
    request.topics[0].partitions[1].committed_offset = 2**63
    result = shard.offset_commit(RequestContext(api_version=9, client_id="c", client_host="/h"), request,
                                 1_700_000_000_000)
    assert result.records.encoded is None
    with pytest.raises(RecordEncodeError):
        serialize_records(result.records)


def _frame_of(request) -> bytes:
    from coordinator.protocol.apis import OFFSET_COMMIT
    from coordinator.protocol.codec import encode_body
    from coordinator.protocol.framing import RequestHeader, frame

    return frame(RequestHeader(OFFSET_COMMIT, request.__version__, 1, "c").encode(2) + encode_body(request))
