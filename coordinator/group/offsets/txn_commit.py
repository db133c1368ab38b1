"""TxnOffsetCommit in the sans-IO core (Kafka: `OffsetMetadataManager.commitTransactionalOffset`,
with the checks `KafkaApis.handleTxnOffsetCommitRequest` and `GroupCoordinatorService` make
before it). Exactly-once offsets; the design is docs/design/transactions.md (option C1).

Rules:
- The handler reads state only and returns a `TxnOffsetWrite`, deliberately not a `Result`:
  the runtime's ordinary write path would append its records outside the client's
  transaction and replay them as committed offsets. The shell appends the records to the
  group's state partition *as the client's producer* (its transactional id, producer id and
  epoch), then calls `replay_pending` with the offset they landed at: they become offsets
  pending for that producer id. The transaction's end marker, written by the upstream's
  transaction coordinator, applies (COMMIT) or drops (ABORT) them through
  `shard.replay_end_transaction` (offsets/store.py holds the ordering rule).
- The records are OffsetCommit's own key and value (Kafka writes the same record for both
  APIs); a TxnOffsetCommit has no retention time, so no expire timestamp (value version 4).
- Wire versions stop at the handler's edges. On the way in, the request becomes one shape
  (`TxnOffsetCommit`: the newest version's meaning, its topics kio's, uncopied) and each
  topic is resolved to the metadata image's `TopicImage`
  (`_topic_lookup`: by name below v6, by id from v6, KIP-1319, where the request names no
  topic); on the way out, a refusal's code is mapped once to what the version knows
  (coordinator/protocol/error_responses.py `txn_offset_commit_code`) and `_response` names
  each topic as the request did. The checks raise the newest version's codes.
- Checks, in Kafka's order:
  1. an empty group id: INVALID_GROUP_ID on every partition (GroupCoordinatorService);
  2. per partition, a topic the metadata does not know: UNKNOWN_TOPIC_OR_PARTITION by name,
     UNKNOWN_TOPIC_ID by id; a partition the topic does not have: UNKNOWN_TOPIC_OR_PARTITION
     (KafkaApis' metadata cache check). Only the rest reaches the group checks; a request
     with nothing left ends here, as in KafkaApis;
  3. the group (`validate_transactional_commit`): absent with generation < 0 is accepted
     (replay creates a "simple" classic group); absent otherwise GROUP_ID_NOT_FOUND
     (ILLEGAL_GENERATION below v6). Classic groups: KIP-447 member, instance and generation
     checks without the checks a transaction coordinator cannot satisfy. Consumer groups:
     KIP-1251, assignment epoch <= client epoch <= member epoch per partition, and a stale
     epoch answers STALE_MEMBER_EPOCH (ILLEGAL_GENERATION below v6: KIP-1251 "a
     ILLEGAL_GENERATION for transactional offset commits", KIP-1319). A group-level refusal
     fails every partition that reached the coordinator;
  4. kcoord's bound on pending transactional state (`limits`), see below;
  5. per partition, metadata over offset.metadata.max.bytes: OFFSET_METADATA_TOO_LARGE.
- Memory bound. Kafka caps nothing here: pending offsets of a producer live until its
  transaction ends, and the transaction coordinator aborts any transaction older than its
  timeout (transaction.max.timeout.ms, 15 min by default), which drops them; one
  (producer, group) holds at most one entry per partition that exists. kcoord adds hard caps
  so a hostile client (many producer ids, many groups) cannot grow a shard without bound:
  pending partitions (and open groups) per producer, open producers per group, pending
  partitions (and open producers) per shard.
  Over a cap the whole request answers TRANSACTION_ABORTABLE (v4+; INVALID_TXN_STATE below) and
  nothing is written: the Java producer's TxnOffsetCommit handler makes it an abortable error
  (abort, then go on with the same transactional id), where an error it does not list
  (POLICY_VIOLATION, say) is fatal ("Unexpected error in TxnOffsetCommitResponse") and a
  retriable one would be retried until the transaction times out.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

from kio.schema.errors import ErrorCode

from ...protocol.error_responses import txn_offset_commit_code
from ...protocol.messages import schema
from .. import record_helpers as rh
from ..errors import ApiError
from ..group_types import group_type
from ..kio_util import build
from ..result import Result
from ..timeutil import from_ms
from .commit_validation import ACCEPT_ALL, PartitionCheck

if TYPE_CHECKING:
    from records import CoordinatorRecord

    from ..context import OffsetsView, RequestContext
    from ..image import MetadataImage, TopicImage


@dataclass(frozen=True, slots=True)
class TxnOffsetLimits:
    """Caps on pending transactional offsets (see the module rules). A config may override
    each through a field of the same name prefixed `txn_`."""
    max_pending_per_producer: int = 50_000
    max_open_producers_per_group: int = 10_000
    max_pending_per_shard: int = 1_000_000


DEFAULT_LIMITS = TxnOffsetLimits()
# KIP-1319: TxnOffsetCommit names its topics by id, and by id only.
FIRST_TOPIC_ID_VERSION = 6


def limits_of(config: object) -> TxnOffsetLimits:
    d = DEFAULT_LIMITS
    return TxnOffsetLimits(
        max_pending_per_producer=getattr(config, "txn_max_pending_per_producer", d.max_pending_per_producer),
        max_open_producers_per_group=getattr(config, "txn_max_open_producers_per_group",
                                             d.max_open_producers_per_group),
        max_pending_per_shard=getattr(config, "txn_max_pending_per_shard", d.max_pending_per_shard))


class TxnOffsetWrite(NamedTuple):
    """What the shell appends as the client's producer, and the answer once it is durable.
    `result.records` is empty when nothing is to be written (every partition refused): the
    response is then answered at once."""
    result: Result
    group_id: str
    transactional_id: str
    producer_id: int
    producer_epoch: int


# ------------------------------------------------------------------- validation
def validate_transactional_commit(image: MetadataImage, group, member_id: str, instance_id: str | None,
                                  generation: int, api_version: int) -> PartitionCheck:
    """Kafka's `validateTransactionalOffsetCommit` for an existing group, in the newest
    version's codes (STALE_MEMBER_EPOCH; `txn_offset_commit_code` maps them per version)."""
    return group_type(group).validate_offset_commit(group, image, member_id, instance_id, generation, api_version,
                                                    transactional=True)


def _check_group(shard: OffsetsView, ctx: RequestContext, req: TxnOffsetCommit) -> PartitionCheck:
    group = shard.groups.get(req.group_id)
    generation = req.generation_id_or_member_epoch
    if group is None:
        if generation < 0:
            return ACCEPT_ALL       # the offset record's replay creates a simple classic group
        raise ApiError(ErrorCode.group_id_not_found,
                       f"Group {req.group_id} does not exist, and generation {generation} is not -1.")
    return validate_transactional_commit(shard.image, group, req.member_id, req.group_instance_id, generation,
                                         ctx.api_version)


def transaction_abortable(api_version: int) -> ErrorCode:
    """TRANSACTION_ABORTABLE as TxnOffsetCommit `api_version` may carry it (INVALID_TXN_STATE
    below v4: coordinator/protocol/error_responses.py `txn_offset_commit_code`)."""
    return txn_offset_commit_code(api_version, ErrorCode.transaction_abortable)


def _check_limits(shard: OffsetsView, req: TxnOffsetCommit, partitions: list[tuple[str, int]]) -> None:
    limits = limits_of(shard.config)
    abortable = ErrorCode.transaction_abortable
    store = shard.offsets
    pid, group_id = req.producer_id, req.group_id
    mine = store.pending_in(pid, group_id)
    new = sum(1 for t, p in set(partitions) if p not in mine.get(t, {}))
    if store.pending_counts.get(pid, 0) + new > limits.max_pending_per_producer:
        raise ApiError(abortable,
                       f"Producer {pid} would hold more than {limits.max_pending_per_producer} pending "
                       f"transactional offsets in this coordinator; end the transaction first.")
    # A group stays open for the producer until its marker even once OffsetDelete removed its
    # offsets: each open group costs memory too, so it counts against the same bound.
    groups = store.pending_transactional.get(pid, {})
    if group_id not in groups and len(groups) >= limits.max_pending_per_producer:
        raise ApiError(abortable,
                       f"Producer {pid} already has open transactional offsets in {len(groups)} groups "
                       f"(the limit is {limits.max_pending_per_producer}).")
    producers = store.open_transactions.get(group_id, set())
    if pid not in producers and len(producers) >= limits.max_open_producers_per_group:
        raise ApiError(abortable,
                       f"Group {group_id} already has {len(producers)} producers with open transactions "
                       f"(the limit is {limits.max_open_producers_per_group}).")
    if new and store.pending_total() + new > limits.max_pending_per_shard:
        raise ApiError(abortable,
                       f"The coordinator shard holds {store.pending_total()} pending transactional offsets "
                       f"(the limit is {limits.max_pending_per_shard}).")
    if pid not in store.pending_transactional and len(store.pending_transactional) >= limits.max_pending_per_shard:
        raise ApiError(abortable,
                       f"The coordinator shard has {len(store.pending_transactional)} producers with open "
                       f"transactional offsets (the limit is {limits.max_pending_per_shard}).")


def _java_length(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


# ------------------------------------------------------------------ the wire's edges
class TxnOffsetCommit:
    """A TxnOffsetCommit request in one shape, whatever its version, with the newest version's
    meaning (built at the handler's door, as offsets/requests.py builds OffsetCommit's). A
    field an older version lacks gets what Kafka assumes for it: no generation, member or
    instance before v3 (-1, "", None), no leader epoch before v2 (-1). kio names the
    generation GenerationId (v3-5), Kafka 4.4's definitions GenerationIdOrMemberEpoch (the
    generated v6): one field on the wire (docs/design/messages.md). The topics and partitions
    stay kio's, as sent: `by_id` says how they name a topic (KIP-1319: by id from v6, by id only).
    What the version changes in the answer is a field too: `response_schema`, and
    `refusal_code`, a refusal's code as the version knows it (`txn_offset_commit_code`)."""

    __slots__ = ("transactional_id", "group_id", "producer_id", "producer_epoch", "generation_id_or_member_epoch",
                 "member_id", "group_instance_id", "by_id", "leader_epochs", "topics", "response_schema",
                 "refusal_code")

    def __init__(self, req: Any) -> None:
        version = req.__version__
        self.transactional_id: str = req.transactional_id
        self.group_id: str = req.group_id
        self.producer_id: int = req.producer_id
        self.producer_epoch: int = req.producer_epoch
        if version >= 6:
            self.generation_id_or_member_epoch: int = req.generation_id_or_member_epoch
        else:
            self.generation_id_or_member_epoch = req.generation_id if version >= 3 else -1
        self.member_id: str = req.member_id if version >= 3 else ""
        self.group_instance_id: str | None = req.group_instance_id if version >= 3 else None
        self.by_id: bool = version >= FIRST_TOPIC_ID_VERSION
        self.leader_epochs: bool = version >= 2
        self.topics: Any = req.topics
        self.response_schema: ModuleType = schema("txn_offset_commit", version)
        self.refusal_code: Callable[[ErrorCode], ErrorCode] = _refusal_codes(version)


@functools.cache
def _refusal_codes(version: int) -> Callable[[ErrorCode], ErrorCode]:
    return functools.partial(txn_offset_commit_code, version)


def _topic_lookup(image: MetadataImage, req: TxnOffsetCommit) -> tuple[Mapping[Any, TopicImage],
                                                                        Callable[[Any], Any], ErrorCode]:
    """Where a request topic is looked up, by what, and the code of a topic the image does not
    know: by name (UNKNOWN_TOPIC_OR_PARTITION), or by id (KIP-1319: UNKNOWN_TOPIC_ID, as KafkaApis
    answers an id its metadata cache cannot name). Past this point the handler reads the
    `TopicImage` only."""
    if req.by_id:
        return image.topics_by_id, _TOPIC_ID, ErrorCode.unknown_topic_id
    return image.topics_by_name, _TOPIC_NAME, ErrorCode.unknown_topic_or_partition


_TOPIC_ID, _TOPIC_NAME = attrgetter("topic_id"), attrgetter("name")


def _response(req: TxnOffsetCommit, answers: dict[tuple[int, int], ErrorCode]) -> Any:
    """The answer in the request's version, each topic named as the request named it. The
    codes in ``answers`` are already the version's."""
    mod = req.response_schema
    part_cls, topic_cls = mod.TxnOffsetCommitResponsePartition, mod.TxnOffsetCommitResponseTopic
    topics = []
    for i, t in enumerate(req.topics):
        parts = tuple(build(part_cls, partition_index=p.partition_index, error_code=answers[(i, p.partition_index)])
                      for p in t.partitions)
        topics.append(build(topic_cls, topic_id=t.topic_id, partitions=parts) if req.by_id
                      else build(topic_cls, name=t.name, partitions=parts))
    return build(mod.TxnOffsetCommitResponse, throttle_time=from_ms(0), topics=tuple(topics))


# ---------------------------------------------------------------------- handler
def txn_offset_commit(shard: OffsetsView, ctx: RequestContext, wire_request: Any, now_ms: int) -> TxnOffsetWrite:
    req = TxnOffsetCommit(wire_request)
    topics, key, unknown_topic = _topic_lookup(shard.image, req)
    answers: dict[tuple[int, int], ErrorCode] = {}     # (topic index, partition index) -> error
    known: list[tuple[int, TopicImage, Any]] = []       # (topic index, topic image, partition)
    for i, t in enumerate(req.topics):
        img = topics.get(key(t))
        for p in t.partitions:
            if not req.group_id:
                answers[(i, p.partition_index)] = ErrorCode.invalid_group_id
            elif img is None:
                answers[(i, p.partition_index)] = unknown_topic
            elif not 0 <= p.partition_index < img.num_partitions:
                answers[(i, p.partition_index)] = ErrorCode.unknown_topic_or_partition
            else:
                known.append((i, img, p))
    records: list[CoordinatorRecord] = []
    if known:
        try:
            check = _check_group(shard, ctx, req)
            _check_limits(shard, req, [(img.name, p.partition_index) for _, img, p in known])
            leader_epochs = req.leader_epochs
            for i, img, p in known:
                metadata = p.committed_metadata or ""
                if _java_length(metadata) > shard.config.offset_metadata_max_bytes:
                    answers[(i, p.partition_index)] = ErrorCode.offset_metadata_too_large
                    continue
                error = check(img.topic_id, img.name, p.partition_index)
                if error is not None:
                    raise ApiError(error, f"Partition {img.name}-{p.partition_index} is not assigned to member "
                                          f"{req.member_id} at epoch {req.generation_id_or_member_epoch}.")
                answers[(i, p.partition_index)] = ErrorCode.none
                records.append(rh.offset_commit_record(
                    req.group_id, img.name, p.partition_index, p.committed_offset,
                    p.committed_leader_epoch if leader_epochs else -1, metadata, now_ms, -1, img.topic_id))
        except ApiError as e:
            shard.log.info("[GroupId %s] TxnOffsetCommit of transactional id %s (producer %d epoch %d) refused: "
                           "%s %s", req.group_id, req.transactional_id, req.producer_id, req.producer_epoch,
                           e.code.name, e.message or "")
            records = []
            # The checks raise the newest version's codes: the one place a code leaves for the
            # wire, mapped once per request (the success path has nothing to map).
            refused = req.refusal_code(e.code)
            for i, _, p in known:
                answers[(i, p.partition_index)] = refused
    return TxnOffsetWrite(Result(response=_response(req, answers), records=records),
                          req.group_id, req.transactional_id, req.producer_id, req.producer_epoch)


def replay_pending(shard, write: TxnOffsetWrite, base_offset: int) -> None:
    """Replay an appended TxnOffsetCommit as the producer's pending offsets; `base_offset` is
    where the batch landed in the state partition (record i is at base_offset + i)."""
    for i, record in enumerate(write.result.records):
        shard.replay(record, base_offset + i, write.producer_id)


def add_offsets_to_txn_response(version: int, code: ErrorCode) -> Any:
    """AddOffsetsToTxn's answer (throttle 0, one error code)."""
    mod = schema("add_offsets_to_txn", version)
    return build(mod.AddOffsetsToTxnResponse, throttle_time=from_ms(0), error_code=code)

