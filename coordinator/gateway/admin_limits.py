"""Size rules for forwarded admin requests: what Kafka's controller enforces, enforced here
before an upstream that may not (Tansu allocates for every partition it is asked for).

Rules (pure functions over a decoded request and kcoord's metadata view, ``ClusterFacts``):
- CreateTopics, whole request (Kafka: ReplicationControlManager.createTopics): the topics
  counted are the request's minus duplicated names (ControllerApis drops every entry of a
  duplicated name) and minus those refused already (the state topic: an authorization
  refusal, which Kafka filters out first).
  1. Partitions: a topic with ``assignments`` counts their number, else ``num_partitions``
     (-1: the upstream's ``num.partitions``, ``ClusterFacts.default_partitions``; <= 0
     counts 0). Over 10,000 (MAX_PARTITIONS_PER_BATCH): POLICY_VIOLATION, "Excessively
     large number of partitions per request.".
  2. Records: each topic that would be created writes one TopicRecord, one PartitionRecord
     per partition and one ConfigRecord per distinct config name, into one list bounded at
     10,000 (MAX_RECORDS_PER_USER_OP, BoundedList); over it Kafka's controller answers
     POLICY_VIOLATION, "Unable to perform excessively large batch operation.". A topic
     kcoord knows to fail (it exists, or a per-topic rule below refuses it) writes nothing.
  Either refusal answers every topic of the request with it and forwards nothing
  (CreateTopicsRequest.getErrorResponse); ``validate_only`` changes nothing, as in Kafka.
- CreateTopics and CreatePartitions: every entry of a name given twice gets INVALID_REQUEST
  "Duplicate topic name." (ControllerApis) and is not forwarded.
- CreateTopics, per topic, in Kafka's order (createTopic), for every topic: one kcoord's
  view knows to exist gets Kafka's TOPIC_ALREADY_EXISTS ("Topic 'X' already exists.") when
  it fails a rule below, else it is forwarded (the upstream answers it). The view can lag a
  DeleteTopics, and a forwarded invalid topic is what Tansu 0.6 allocates from. The rules:
  explicit assignments need ``replication_factor`` and ``num_partitions`` of -1
  (INVALID_REQUEST), no partition index twice, each replica list non-empty, of brokers
  kcoord's Metadata lists, none twice, all of one length, and indexes 0..n-1
  (INVALID_REPLICA_ASSIGNMENT; Tansu 0.6 accepts all of these, measured);
  without assignments a replication factor of 0 or below -1 is INVALID_REPLICATION_FACTOR,
  partitions of 0 or below -1 INVALID_PARTITIONS, and a replication factor above the
  brokers kcoord's Metadata lists is INVALID_REPLICATION_FACTOR (the replica placer's
  message). Those topics are answered here; the others are forwarded (state_guard.Split).
- CreatePartitions, whole request (a deliberate difference, docs/design/differential.md: Kafka
  4.3 has no bound): the partitions it adds, summed over its topics (each topic's
  ``count`` minus its current count; a topic kcoord has not seen yet has at least one),
  over 10,000: POLICY_VIOLATION with the CreateTopics message on every topic.
- The other admin writes Kafka's controller turns into records in one list bounded at
  10,000 (``record_cap``): IncrementalAlterConfigs and AlterConfigs (a ConfigRecord per
  changed key: kcoord counts the distinct keys of the distinct resources, an upper bound,
  as it cannot know which values change), CreateAcls (an AccessControlEntryRecord per new
  distinct ACL: kcoord counts distinct bindings) and AlterClientQuotas (a record per
  distinct key of each entity) and AlterPartitionReassignments (at most a record per
  partition named). Over it Kafka's controller fails the whole request, and kcoord answers
  every entry with POLICY_VIOLATION, "Unable to perform excessively large batch
  operation." (AlterPartitionReassignments: at the top and on every partition). Not
  bounded here: DeleteAcls (Kafka: "Cannot remove more than 10000 acls in a single delete
  operation." counts the ACLs its filters *match*, which only the upstream knows),
  UpdateFeatures (one record per feature: a handful exist) and ElectLeaders (Kafka's list
  is not bounded; a record per existing partition), each left to the upstream.
Nothing here needs the upstream: the view may lag by one metadata refresh, which only
matters for a topic created or grown within the last second (then kcoord counts high).
"""
from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

CREATE_ACLS = 30
ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45
ALTER_CLIENT_QUOTAS = 49

MAX_PARTITIONS_PER_BATCH = 10_000     # Kafka: ReplicationControlManager.MAX_PARTITIONS_PER_BATCH
MAX_RECORDS_PER_USER_OP = 10_000      # Kafka: QuorumController.MAX_RECORDS_PER_USER_OP

TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
TOO_MANY_RECORDS = "Unable to perform excessively large batch operation."

POLICY_VIOLATION = ErrorCode.policy_violation

# Rules, as metric label values (a fixed set).
RULE_PARTITIONS = "partitions_per_request"
RULE_RECORDS = "records_per_request"
RULE_TOPIC = "create_topic_rules"


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What the rules read of the upstream cluster (the gateway's metadata view)."""

    broker_count: int                                 # 0: not known yet (no broker check)
    partitions: Callable[[str], int | None]           # a topic's current partition count
    default_partitions: int = 1                       # the upstream's num.partitions
    topic_name: Callable[[Any], str | None] = lambda topic_id: None   # a topic id's name
    broker_ids: frozenset[int] = frozenset()         # the brokers kcoord's Metadata lists (empty: unknown)


@dataclass(frozen=True, slots=True)
class Refusal:
    """``whole``: (code, message) for every entry, nothing forwarded; else ``entries``:
    index -> (code, message) for the entries answered here (the others forwarded)."""

    rule: str
    whole: tuple[ErrorCode, str] | None = None
    entries: dict[int, tuple[ErrorCode, str]] | None = None


DUPLICATE_TOPIC = "Duplicate topic name."    # Kafka's ControllerApis, CreateTopics and CreatePartitions
NAME_SHOWN = 249        # Kafka's longest legal topic name (Topic.MAX_NAME_LENGTH)


def shown(text: str) -> str:
    """A client's name or value as a message quotes it: at most 249 characters, so that the
    message fits a response's string field (32,767 bytes; a name can fill one by itself)."""
    return text if len(text) <= NAME_SHOWN else f"{text[:NAME_SHOWN]}... ({len(text)} characters)"


def _duplicated(names: Sequence[str]) -> set[str]:
    seen: set[str] = set()
    twice: set[str] = set()
    for name in names:
        (twice if name in seen else seen).add(name)
    return twice


def create_topic_error(topic: Any, facts: ClusterFacts) -> tuple[ErrorCode, str] | None:
    """The per-topic refusal Kafka's createTopic would give, for the rules kcoord checks."""
    rf = topic.replication_factor
    if topic.assignments:
        if rf != -1:
            return (ErrorCode.invalid_request, "A manual partition assignment was specified, but replication "
                    "factor was not set to -1.")
        if topic.num_partitions != -1:
            return (ErrorCode.invalid_request, "A manual partition assignment was specified, but numPartitions "
                    "was not set to -1.")
        seen: set[int] = set()
        replicas: int | None = None
        for assignment in topic.assignments:
            index = assignment.partition_index
            if index in seen:
                return (ErrorCode.invalid_replica_assignment,
                        f"Found multiple manual partition assignments for partition {index}")
            seen.add(index)
            error = replica_list_error(assignment.broker_ids, facts, replicas)
            if error is not None:
                return ErrorCode.invalid_replica_assignment, error
            replicas = len(assignment.broker_ids)
        if any(not 0 <= i < len(seen) for i in seen):
            return ErrorCode.invalid_replica_assignment, "partitions should be a consecutive 0-based integer sequence"
        return None
    if rf < -1 or rf == 0:
        return (ErrorCode.invalid_replication_factor,
                "Replication factor must be larger than 0, or -1 to use the default value.")
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        return ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value."
    if rf > 0 and 0 < facts.broker_count < rf:
        return (ErrorCode.invalid_replication_factor,
                f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot "
                f"be reached because only {facts.broker_count} broker(s) are registered or some brokers have "
                f"all their log directories cordoned.")   # Kafka 4.3.1's text (KIP-1066), measured
    return None


def replica_list_error(broker_ids: Sequence[int], facts: ClusterFacts, replicas: int | None) -> str | None:
    """Kafka's checks of one manual replica list (validateManualPartitionAssignment), in its
    order: not empty, each broker known (brokers in sorted order), none twice, as many
    replicas as the partitions before it. Brokers are checked only once kcoord knows them."""
    if not broker_ids:
        return "The manual partition assignment includes an empty replica list."
    previous = None
    for broker in sorted(broker_ids):
        if facts.broker_ids and broker not in facts.broker_ids:
            return f"The manual partition assignment includes broker {broker}, but no such broker is registered."
        if broker == previous:
            return f"The manual partition assignment includes the broker {broker} more than once."
        previous = broker
    if replicas is not None and len(broker_ids) != replicas:
        return (f"The manual partition assignment includes a partition with {len(broker_ids)} replica(s), but this "
                f"is not consistent with previous partitions, which have {replicas} replica(s).")
    return None


def requested_partitions(topic: Any, default_partitions: int) -> int:
    if topic.assignments:
        return len(topic.assignments)
    n = topic.num_partitions
    return default_partitions if n == -1 else max(0, n)


def check_create_topics(request: Any, facts: ClusterFacts, refused: Sequence[int] = ()) -> Refusal | None:
    """CreateTopics (any version): None (forward as it is) or the Refusal. ``refused``:
    indexes answered already (the state topic), left out of every count."""
    topics = request.topics
    skip = set(refused)
    twice = _duplicated([t.name for t in topics])
    counted = [(i, t) for i, t in enumerate(topics) if i not in skip and t.name not in twice]
    total = 0
    for _, topic in counted:
        total += requested_partitions(topic, facts.default_partitions)
    if total > MAX_PARTITIONS_PER_BATCH:
        return Refusal(RULE_PARTITIONS, whole=(POLICY_VIOLATION, TOO_MANY_PARTITIONS))
    entries = _duplicates_refused(topics, twice, skip)
    records = 0
    for i, topic in counted:
        error = create_topic_error(topic, facts)
        if facts.partitions(topic.name) is not None:
            # Exists: Kafka answers TOPIC_ALREADY_EXISTS before its other rules, and the
            # upstream does for a valid topic (no records). An invalid one is answered here:
            # the view lags a DeleteTopics by up to one refresh, and a topic deleted in that
            # window is created by Tansu 0.6 with what it carries (num_partitions beside
            # assignments, a replication factor it allocates per partition: fuzz/README.md).
            if error is not None:
                entries[i] = (ErrorCode.topic_already_exists, f"Topic '{shown(topic.name)}' already exists.")
            continue
        if error is not None:
            entries[i] = error
            continue
        records += 1 + requested_partitions(topic, facts.default_partitions) \
            + len({c.name for c in topic.configs})
        if records > MAX_RECORDS_PER_USER_OP:
            return Refusal(RULE_RECORDS, whole=(POLICY_VIOLATION, TOO_MANY_RECORDS))
    return Refusal(RULE_TOPIC, entries=entries) if entries else None


def check_create_partitions(request: Any, facts: ClusterFacts, refused: Sequence[int] = ()) -> Refusal | None:
    """CreatePartitions (any version): the partitions it adds, at most 10,000."""
    skip = set(refused)
    twice = _duplicated([t.name for t in request.topics])
    added = 0
    for i, topic in enumerate(request.topics):
        if i in skip or topic.name in twice:
            continue
        current = facts.partitions(topic.name)
        added += max(0, topic.count - (1 if current is None else current))
    if added > MAX_PARTITIONS_PER_BATCH:
        return Refusal(RULE_PARTITIONS, whole=(POLICY_VIOLATION, TOO_MANY_PARTITIONS))
    entries = _duplicates_refused(request.topics, twice, skip)
    return Refusal(RULE_TOPIC, entries=entries) if entries else None


def _duplicates_refused(topics: Sequence[Any], twice: set[str], skip: set[int]) -> dict[int, tuple[ErrorCode, str]]:
    """Every entry of a name the request gives twice: INVALID_REQUEST, as Kafka's
    ControllerApis answers before the controller sees the request. They are answered here,
    never forwarded: Tansu 0.6 creates a name given twice, with the first entry's count, and
    allocates from an absurd one (fuzz/README.md). Kafka answers once per name; kcoord once
    per entry, which clients read the same way (by name)."""
    return {i: (ErrorCode.invalid_request, DUPLICATE_TOPIC) for i, t in enumerate(topics)
            if t.name in twice and i not in skip}


# --- record caps of the other admin writes --------------------------------------------------

def _config_records(request: Any) -> int:
    keys: dict[tuple[int, str], set[str]] = {}
    for r in request.resources:
        keys.setdefault((int(r.resource_type), r.resource_name), set()).update(c.name for c in r.configs)
    return sum(len(k) for k in keys.values())


def _acl_records(request: Any) -> int:
    return len(set(request.creations))


def _quota_records(request: Any) -> int:
    keys: dict[tuple[Any, ...], set[str]] = {}
    for e in request.entries:
        entity = tuple(sorted((d.entity_type, d.entity_name or "") for d in e.entity))
        keys.setdefault(entity, set()).update(op.key for op in e.ops)
    return sum(len(k) for k in keys.values())


def _make(cls: type, **fields: Any) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in names})


def _config_answers(m: Any, request: Any, code: ErrorCode, message: str) -> dict[str, Any]:
    return {"responses": tuple(m.AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                              resource_type=r.resource_type,
                                                              resource_name=r.resource_name)
                               for r in request.resources)}


def _acl_answers(m: Any, request: Any, code: ErrorCode, message: str) -> dict[str, Any]:
    return {"results": tuple(m.AclCreationResult(error_code=code, error_message=message) for _ in request.creations)}


def _quota_answers(m: Any, request: Any, code: ErrorCode, message: str) -> dict[str, Any]:
    return {"entries": tuple(m.EntryData(error_code=code, error_message=message, entity=tuple(
        m.EntityData(entity_type=d.entity_type, entity_name=d.entity_name) for d in e.entity))
        for e in request.entries)}


def _reassignment_records(request: Any) -> int:
    return sum(len(t.partitions) for t in request.topics)


def _reassignment_answers(m: Any, request: Any, code: ErrorCode, message: str) -> dict[str, Any]:
    # Kafka's getErrorResponse: the error at the top and on every partition.
    return {"error_code": code, "error_message": message, "allow_replication_factor_change": True,
            "responses": tuple(m.ReassignableTopicResponse(name=t.name, partitions=tuple(
                m.ReassignablePartitionResponse(partition_index=p.partition_index, error_code=code,
                                                error_message=message) for p in t.partitions))
                for t in request.topics)}


# api key -> (records the request can make, the answer of every entry)
_CAPPED: dict[int, tuple[Callable[[Any], int], Callable[[Any, Any, ErrorCode, str], dict[str, Any]]]] = {
    INCREMENTAL_ALTER_CONFIGS: (_config_records, _config_answers),
    ALTER_CONFIGS: (_config_records, _config_answers),
    CREATE_ACLS: (_acl_records, _acl_answers),
    ALTER_CLIENT_QUOTAS: (_quota_records, _quota_answers),
    ALTER_PARTITION_REASSIGNMENTS: (_reassignment_records, _reassignment_answers),
}
CAPPED_APIS = frozenset(_CAPPED)


def record_cap(api_key: int, response_cls: type, request: Any) -> tuple[Any, str] | None:
    """(the response answering every entry POLICY_VIOLATION, note) when the request can
    make more than MAX_RECORDS_PER_USER_OP records; None otherwise."""
    count, answers = _CAPPED[api_key]
    records = count(request)
    if records <= MAX_RECORDS_PER_USER_OP:
        return None
    m = sys.modules[response_cls.__module__]
    response = _make(response_cls, throttle_time=timedelta(0),
                     **answers(m, request, ErrorCode.policy_violation, TOO_MANY_RECORDS))
    return response, f"{TOO_MANY_RECORDS} ({records} records, at most {MAX_RECORDS_PER_USER_OP})"
