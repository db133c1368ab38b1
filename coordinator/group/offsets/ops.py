"""OffsetCommit, OffsetFetch and OffsetDelete (Kafka: `OffsetMetadataManager`).

Who may commit, fetch or delete is the group type's rule (group_types.py; the commit
rules in offsets/commit_validation.py); this module applies it and builds the answers.
Transactional offsets (TxnOffsetCommit: offsets/txn_commit.py) show here as pending:
OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT on a partition with a
pending offset (KIP-447), and OffsetDelete tombstones pending offsets too.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from records import ZERO_UUID, CoordinatorRecord, OffsetCommitValue
from records.codec import OFFSET_COMMIT_KEYS, EncodedRecords, offset_commit_key, offset_commit_v4_packer

from ...protocol.fast_codec import SHARED_ANSWER_PARTITIONS
from .. import record_helpers as rh
from ..errors import ApiError
from ..group_types import ACCEPT_ALL, PartitionCheck, group_type
from ..kio_util import build
from ..result import Result, TimerOp
from ..timeutil import from_ms
from .requests import CommitAnswer, FetchAnswer, OffsetCommit, OffsetDelete, OffsetFetch

if TYPE_CHECKING:
    from ..context import OffsetsView, RequestContext

def _validate_unknown_group(req: OffsetCommit) -> PartitionCheck:
    """`OffsetMetadataManager.validateOffsetCommit` of a commit to a group that does not exist
    (a known group's commit is its type's rule: `offset_commit` calls it)."""
    if req.generation_id_or_member_epoch < 0:
        return ACCEPT_ALL  # replay creates a "simple" classic group
    if req.group_id_not_found:
        raise ApiError(ErrorCode.group_id_not_found, f"Group {req.group_id} not found.")
    raise ApiError(ErrorCode.illegal_generation)


# ---------------------------------------------------------------- commit
def _java_length(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


# The accepted partitions' answers kept per version (requests.CommitAnswer); a partition
# index is checked against its topic before it gets here, and the bound holds whatever the
# topics.
_ACCEPTED_MAX = 4096


def offset_commit(shard: OffsetsView, ctx: RequestContext, req: OffsetCommit, now_ms: int) -> Result:
    """Topic-level problems (unknown topic id or name, partition out of range) and oversized
    metadata fail single partitions; any group-level validation failure, including a
    KIP-1251 per-partition epoch check, fails every partition (Kafka throws out of the
    partition loop and answers the request with one error)."""
    answer = req.answer
    partition_cls = answer.partition
    by_id, leader_epochs = req.by_id, req.leader_epochs
    max_metadata = shard.config.offset_metadata_max_bytes
    half_max_metadata = max_metadata // 2
    image = shard.image
    retention_ms = req.retention_ms
    expire = now_ms + retention_ms if retention_ms != -1 else -1
    records: list[Any] = _EncodedRecords()
    answers: list[tuple[Any, list[Any]]] = []
    group_id = req.group_id
    # Each accepted partition's record is built here as rh.offset_commit_record builds it (the
    # shared key, the value positionally, the version), without that call per partition:
    # Kafka writes version 1, which has no topic id, only for a commit with a retention time.
    version = 4 if expire == -1 else 1
    # The records' bytes, made here where each value's fields are at hand (records.codec.
    # EncodedRecords: the runtime's serialize takes them as they are); None once a record is
    # not of the packed shape (version 1, metadata, a field out of range): then the codec
    # encodes them all, as before. tests/unit/group/test_offset_commit_records.py compares
    # them with the codec's bytes.
    encoded: list[tuple[bytes, bytes | None]] | None = [] if version == 4 else None
    keys = OFFSET_COMMIT_KEYS
    # The group and its type, looked up once: the validation and the timers read both (the
    # operation changes no state, so the group is the same after the loop).
    group = shard.groups.get(group_id)
    # A known group's commit is its type's rule (group_types.py), called here: no frame of
    # its own per commit.
    kind = group_type(group) if group is not None else None
    # Whether a partition was refused: a commit of one topic without any shares its answer.
    refused = False
    try:
        if kind is None:
            check = _validate_unknown_group(req)
        else:
            check = kind.validate_offset_commit(group, image, req.member_id, req.group_instance_id,
                                                req.generation_id_or_member_epoch, ctx.api_version)
        # A member at its current epoch (and a simple group) may commit any partition: no
        # call per partition then.
        per_partition = check is not ACCEPT_ALL
        for t in req.topics:
            img = image.topics_by_id.get(t.topic_id) if by_id else image.topics_by_name.get(t.name)
            if img is None:
                name, topic_id, num_partitions = "", ZERO_UUID, 0     # no partition is in range
            else:
                name, topic_id, num_partitions = img.name, img.topic_id, img.num_partitions
            record_topic_id = topic_id if version == 4 and topic_id is not None else ZERO_UUID
            if encoded is not None:
                pack, tags = offset_commit_v4_packer(record_topic_id)
            parts = []
            # The topic's shared keys by partition (records.codec.offset_commit_key fills them).
            topic_keys = keys.get((group_id, name)) or _NO_KEYS
            for p in t.partitions:
                index = p.partition_index
                metadata = p.committed_metadata     # None (nullable) or "" for most commits
                if not 0 <= index < num_partitions:
                    code = ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
                # A UTF-16 length is at most twice the code points: only a long one is counted
                # (for integers, 2 * n > max exactly when n > max // 2); none is, if empty.
                elif metadata and len(metadata) > half_max_metadata and _java_length(metadata) > max_metadata:
                    code = ErrorCode.offset_metadata_too_large
                else:
                    if per_partition:
                        error = check(topic_id, name, index)
                        if error is not None:
                            raise ApiError(error)
                    # 4.3 persists the topic id of every commit, resolved by name below v10.
                    # The value positionally: (offset, leader epoch, metadata, commit and
                    # expire timestamps, topic id).
                    key = topic_keys.get(index) or offset_commit_key(group_id, name, index)
                    # Both objects built as `object.__new__` plus their slots, in the fields'
                    # order: a class's call reaches its Python __init__ through the type's slot,
                    # a new interpreter loop per object (docs/measurements/cpu-per-commit.md).
                    # tests/unit/group/test_offset_commit_records.py compares them with
                    # `rh.offset_commit_record`'s, field by field.
                    value = _new(OffsetCommitValue)
                    value.offset = offset = p.committed_offset
                    value.leader_epoch = epoch = p.committed_leader_epoch if leader_epochs else -1
                    value.metadata = metadata or ""
                    value.commit_timestamp = now_ms
                    value.expire_timestamp = expire
                    value.topic_id = record_topic_id
                    value.unknown_tagged_fields = ()
                    record = _new(CoordinatorRecord)
                    record.key = key
                    record.value = value
                    record.value_version = version
                    records.append(record)
                    if encoded is not None:
                        if metadata:
                            encoded = None
                        else:
                            try:
                                encoded.append((key.encoded, pack(4, offset, epoch, 1, now_ms, tags)))
                            except struct.error:
                                encoded = None      # the codec raises its own error for it
                    # An accepted partition by its index: its answer is looked up only when
                    # the commit's answer is not a shared one (`_partitions_out`).
                    parts.append(index)
                    continue
                parts.append(partition_cls(partition_index=index, error_code=code))
                refused = True
            answers.append((t, parts))
    except ApiError as e:
        records = []
        answers = [(t, [partition_cls(partition_index=p.partition_index, error_code=e.code) for p in t.partitions])
                   for t in req.topics]
    else:
        records.encoded = encoded  # type: ignore[attr-defined]
    timers: list[TimerOp] = []
    if records and kind is not None:
        timers = kind.offset_commit_timers(group, req.member_id, now_ms)
    if records and not refused and len(answers) == 1:
        # One topic, every partition accepted: what a consumer sends again and again, and
        # the same answer each time (kio's messages are frozen), so one is shared per
        # (topic, partitions); the topic is the image's, the partitions are bounded here.
        t, accepted_indices = answers[0]
        indices = tuple(accepted_indices)
        shared_key = (t.topic_id if by_id else t.name, indices)
        response = answer.accepted_responses.get(shared_key)
        if response is None:
            response = _response(answer, by_id, answers)
            if len(indices) <= _SHARED_RESPONSE_PARTITIONS:
                if len(answer.accepted_responses) >= _ACCEPTED_MAX:
                    answer.accepted_responses.clear()
                answer.accepted_responses[shared_key] = response
    else:
        response = _response(answer, by_id, answers)
    # Positionally (response, records, timers): keywords cost a NamedTuple more per call; and
    # through its own __new__, not the class's call (which reaches it through the type's slot).
    return _new_result(Result, response, records, timers)


_new = object.__new__
_EncodedRecords = EncodedRecords
_NO_KEYS: dict[int, Any] = {}       # read only: a topic with no shared key yet
_new_result = Result.__new__
# The answers of all-accepted commits are shared (above) up to this many partitions each;
# the gateway keeps the encoded body of those answers only (protocol/fast_codec.py).
_SHARED_RESPONSE_PARTITIONS = SHARED_ANSWER_PARTITIONS


def _response(answer: CommitAnswer, by_id: bool, answers: list[tuple[Any, list[Any]]]) -> Any:
    topic_cls = answer.topic
    topics_out = tuple(topic_cls(topic_id=t.topic_id, partitions=_partitions_out(answer, parts)) if by_id else
                       topic_cls(name=t.name, partitions=_partitions_out(answer, parts)) for t, parts in answers)
    return answer.response(throttle_time=_NO_THROTTLE, topics=topics_out) if answer.has_throttle \
        else answer.response(topics=topics_out)


_NO_THROTTLE = from_ms(0)


def _partitions_out(answer: CommitAnswer, parts: list[Any]) -> tuple[Any, ...]:
    """A topic's answered partitions from `offset_commit`'s loop: a refused partition's
    answer as built there, an accepted one's index (an int) as the version's shared accepted
    answer (kio's messages are frozen), kept for at most `_ACCEPTED_MAX` indices."""
    partition_cls, accepted_parts = answer.partition, answer.accepted
    out = []
    for p in parts:
        if p.__class__ is not partition_cls:
            accepted = accepted_parts.get(p)
            if accepted is None:
                accepted = partition_cls(partition_index=p, error_code=ErrorCode.none)
                if len(accepted_parts) < _ACCEPTED_MAX:
                    accepted_parts[p] = accepted
            p = accepted
        out.append(p)
    return tuple(out)


# ----------------------------------------------------------------- fetch
def _validate_fetch(group, member_id: str | None, member_epoch: int) -> None:
    """OffsetFetch v9+ (KIP-848): the group type's check (group_types.py)."""
    group_type(group).validate_offset_fetch(group, member_id, member_epoch)


def fetch_offsets(shard: OffsetsView, answer: FetchAnswer, group_id: str, topics, require_stable: bool,
                  member_id: str | None = None, member_epoch: int = -1):
    """Offsets of one group as a list of response topics in `answer`'s classes (Kafka:
    `fetchOffsets` / `fetchAllOffsets`). Raises ApiError for group-level errors."""
    group = shard.groups.get(group_id)
    if group is not None:
        _validate_fetch(group, member_id, member_epoch)
    by_id = answer.by_id
    committed = shard.offsets.group(group_id)
    part_cls, topic_cls = answer.partition, answer.topic
    image = shard.image

    def partition(topic: str, p: int, requested_id=None):
        if require_stable and shard.offsets.has_pending(group_id, topic, p):
            return build(part_cls, partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                         metadata="", error_code=ErrorCode.unstable_offset_commit)
        o = committed.get(topic, {}).get(p)
        if o is not None and requested_id is not None and o.topic_id and o.topic_id.int \
                and requested_id.int and o.topic_id != requested_id:
            o = None  # KAFKA-19154: the offset belongs to an older topic of the same name
        if o is None:
            return build(part_cls, partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                         metadata="", error_code=ErrorCode.none)
        return build(part_cls, partition_index=p, committed_offset=o.offset,
                     committed_leader_epoch=o.leader_epoch, metadata=o.metadata,
                     error_code=ErrorCode.none)

    out = []
    if topics is None:
        for topic, parts in committed.items():
            topic_id = None
            if by_id:
                img = image.topics_by_name.get(topic)
                if img is None:
                    continue  # v10 can only name topics that still exist
                topic_id = img.topic_id
            out.append(build(topic_cls, name=topic, topic_id=topic_id,
                             partitions=tuple(partition(topic, p) for p in sorted(parts))))
        return out
    for t in topics:
        if by_id:
            img = image.topics_by_id.get(t.topic_id)
            if img is None:
                out.append(build(topic_cls, topic_id=t.topic_id, partitions=tuple(
                    build(part_cls, partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                          metadata="", error_code=ErrorCode.unknown_topic_id)
                    for p in t.partition_indexes)))
                continue
            name = img.name
        else:
            name = t.name
        requested_id = t.topic_id if by_id else None
        out.append(build(topic_cls, name=name, topic_id=requested_id,
                         partitions=tuple(partition(name, p, requested_id) for p in t.partition_indexes)))
    return out


def offset_fetch(shard: OffsetsView, ctx: RequestContext, req: OffsetFetch, now_ms: int) -> Result:
    """Single-group versions (1-7) only; v8+ multi-group requests are split per shard by the
    service, which calls `fetch_offsets` for each group with the version's `fetch_answer`."""
    mod = req.answer.response_schema
    try:
        topics = fetch_offsets(shard, req.answer, req.group_id, req.topics, req.require_stable)
        code = ErrorCode.none
    except ApiError as e:
        topics, code = [], e.code
    return Result(response=build(mod.OffsetFetchResponse, throttle_time=from_ms(0),
                                 topics=tuple(topics), error_code=code))


# ---------------------------------------------------------------- delete
def offset_delete(shard: OffsetsView, ctx: RequestContext, req: OffsetDelete, now_ms: int) -> Result:
    mod = req.response_schema
    group = shard.groups.get(req.group_id)
    error = ErrorCode.none
    if group is None:
        error = ErrorCode.group_id_not_found
    else:
        error = group_type(group).offset_delete_error(group) or ErrorCode.none
    if error is not ErrorCode.none:
        return Result(response=build(mod.OffsetDeleteResponse, error_code=error,
                                     throttle_time=from_ms(0), topics=()))
    subscribed = group_type(group).subscribed_topics(group)
    records = []
    topics_out = []
    for t in req.topics:
        parts_out = []
        for p in t.partitions:
            if t.name in subscribed:
                code = ErrorCode.group_subscribed_to_topic
            else:
                code = ErrorCode.none
                # Kafka: "A tombstone is written if an offset is present in the main storage
                # or if a pending transactional offset exists" (the tombstone drops both).
                if shard.offsets.get(req.group_id, t.name, p.partition_index) is not None \
                        or shard.offsets.has_pending(req.group_id, t.name, p.partition_index):
                    records.append(rh.offset_tombstone(req.group_id, t.name, p.partition_index))
            parts_out.append(build(mod.OffsetDeleteResponsePartition, partition_index=p.partition_index,
                                   error_code=code))
        topics_out.append(build(mod.OffsetDeleteResponseTopic, name=t.name, partitions=tuple(parts_out)))
    return Result(response=build(mod.OffsetDeleteResponse, error_code=ErrorCode.none,
                                 throttle_time=from_ms(0), topics=tuple(topics_out)), records=records)
