"""The verdict on a decoded admin request: Kafka's own limits (admin_limits.py), then the
operator's safeguards (safeguards.py), then the controller-mutation rate, in Kafka's order.

Rules:
- Entries refused already (the state topic, an authorization refusal) are left out of
  every count, as Kafka filters unauthorized topics out before its controller sees them.
- Order: Kafka's request-wide limits, then the safeguard's request-wide limit (each answers
  every entry: ``Verdict.whole``), then per entry Kafka's rules (INVALID_REQUEST,
  INVALID_REPLICATION_FACTOR, ...), the safeguards (POLICY_VIOLATION: Kafka runs its
  create-topic policy after its own checks) and last the mutation quota (Kafka applies it
  to a topic that passed everything else). An entry gets the first refusal that applies.
- The quota is KIP-599's strict one on CreateTopics v6+, CreatePartitions v3+ and
  DeleteTopics v5+; older versions get Kafka's permissive one (accepted and recorded, the
  answer carrying a throttle time while the principal is in debt); never on
  ``validate_only`` (Kafka uses an unbounded quota there). A
  topic kcoord knows to exist (CreateTopics) or not to (DeleteTopics, CreatePartitions)
  takes nothing: the upstream answers it with its own error.
- IncrementalAlterConfigs: a resource with a config operation outside 0-3 is INVALID_REQUEST,
  with or without safeguards, and never forwarded (`unknown_config_operations`: it makes
  Kafka 4.4's controller renounce its leadership).
This module decides; state_guard.py builds the answers and the split.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.apis import ALTER_CONFIGS, CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, INCREMENTAL_ALTER_CONFIGS
from . import safeguards
from .admin_limits import ClusterFacts, check_create_partitions, check_create_topics, requested_partitions, shown
from .safeguards import RULE_QUOTA, RULE_SAFEGUARD, Rules, Safeguards

# KIP-599: the first version of each API whose answer can carry THROTTLING_QUOTA_EXCEEDED.
QUOTA_VERSIONS = {CREATE_TOPICS: 6, CREATE_PARTITIONS: 3, DELETE_TOPICS: 5}
THROTTLED = "The throttling quota has been exceeded."     # Kafka's Errors.THROTTLING_QUOTA_EXCEEDED


@dataclass(frozen=True, slots=True)
class Policy:
    """The safeguards that apply to one request: its client's rules and the shared buckets."""

    rules: Rules
    guards: Safeguards
    principal: str


@dataclass(slots=True)
class Verdict:
    whole: tuple[ErrorCode, str] | None = None
    entries: dict[int, tuple[ErrorCode, str]] = field(default_factory=dict)
    rule: str = ""
    throttle_ms: int = 0


def _add(verdict: Verdict, entries: dict[int, tuple[ErrorCode, str]] | None, rule: str) -> None:
    fresh = {i: e for i, e in (entries or {}).items() if i not in verdict.entries}
    if fresh:
        verdict.entries.update(fresh)
        verdict.rule = verdict.rule or rule


def judge(api_key: int, version: int, request: Any, refused: list[int], facts: ClusterFacts | None,
          policy: Policy | None) -> Verdict | None:
    """The verdict on CreateTopics, CreatePartitions or DeleteTopics (None: nothing refused)."""
    skip = set(refused)
    verdict = Verdict()
    if api_key == CREATE_TOPICS or api_key == CREATE_PARTITIONS:
        check = check_create_topics if api_key == CREATE_TOPICS else check_create_partitions
        limit = check(request, facts, refused) if facts is not None else None
        if limit is not None and limit.whole is not None:
            return Verdict(whole=limit.whole, rule=limit.rule)
        if limit is not None:
            _add(verdict, limit.entries, limit.rule)
        if policy is not None and facts is not None:
            if api_key == CREATE_TOPICS:
                whole, entries = safeguards.create_topics(policy.rules, request, skip | set(verdict.entries),
                                                          facts.default_partitions)
            else:
                whole, entries = safeguards.create_partitions(policy.rules, request, skip | set(verdict.entries),
                                                              facts.partitions)
            if whole is not None:
                return Verdict(whole=whole, rule=RULE_SAFEGUARD)
            _add(verdict, entries, RULE_SAFEGUARD)
    elif api_key == DELETE_TOPICS and policy is not None:
        _add(verdict, safeguards.delete_topics(policy.rules, _names(request, version, facts), skip), RULE_SAFEGUARD)
    if policy is not None and facts is not None:
        _quota(api_key, version, request, skip, facts, policy, verdict)
    return verdict if verdict.entries or verdict.whole or verdict.throttle_ms else None


def _names(request: Any, version: int, facts: ClusterFacts | None = None) -> list[str | None]:
    """The topics a DeleteTopics names; one named by id only (v6+) by the name kcoord's view
    gives that id (None: not known)."""
    if version < 6:
        return list(request.topic_names)
    return [t.name or (facts.topic_name(t.topic_id) if facts is not None else None) for t in request.topics]


def _quota(api_key: int, version: int, request: Any, skip: set[int], facts: ClusterFacts, policy: Policy,
           verdict: Verdict) -> None:
    rate = policy.rules.controller_mutation_rate
    if rate <= 0 or api_key not in QUOTA_VERSIONS or getattr(request, "validate_only", False):
        return
    strict = version >= QUOTA_VERSIONS[api_key]
    if api_key == CREATE_TOPICS:
        costs = [(i, 0 if facts.partitions(t.name) is not None else requested_partitions(
                  t, facts.default_partitions)) for i, t in enumerate(request.topics)]
    elif api_key == CREATE_PARTITIONS:
        costs = [(i, max(0, t.count - (facts.partitions(t.name) or t.count))) for i, t in enumerate(request.topics)]
    else:
        costs = [(i, facts.partitions(name) or 0) if name is not None else (i, 1)
                 for i, name in enumerate(_names(request, version, facts))]
    refused: dict[int, tuple[ErrorCode, str]] = {}
    if not strict:
        # Kafka's permissive quota for older versions: everything is accepted and recorded;
        # the answer carries the time until the debt is paid (clients back off by it).
        cost = sum(c for i, c in costs if i not in skip and i not in verdict.entries)
        wait = policy.guards.take(policy.principal, rate, cost, strict=False) if cost else 0.0
        if wait > 0:
            verdict.throttle_ms = max(verdict.throttle_ms, max(1, round(wait * 1000)))
            verdict.rule = verdict.rule or RULE_QUOTA
        return
    for i, cost in costs:
        if i in skip or i in verdict.entries or cost == 0:
            continue
        wait = policy.guards.take(policy.principal, rate, cost)
        if wait > 0:
            scope = policy.rules.scope("controller.mutation.rate")
            refused[i] = (ErrorCode.throttling_quota_exceeded, f"{THROTTLED} (kcoord safeguard "
                          f"safeguard.controller.mutation.rate ({scope}): {rate:g} partitions/s)")
            verdict.throttle_ms = max(verdict.throttle_ms, max(1, round(wait * 1000)))
    _add(verdict, refused, RULE_QUOTA)


# IncrementalAlterConfigs' operations (AlterConfigOp.OpType): SET, DELETE, APPEND, SUBTRACT.
CONFIG_OPERATIONS = range(4)
RULE_CONFIG_OPERATION = "config_operation"


def unknown_config_operations(request: Any) -> dict[int, tuple[ErrorCode, str]]:
    """Resources with a config operation outside SET..SUBTRACT. Kafka 4.4's broker hands such
    a TOPIC resource to its controller, whose incrementalAlterConfigs fails on the null
    OpType (NullPointerException): a controller fault, so the controller renounces its
    leadership, and the resource is answered UNKNOWN_SERVER_ERROR. One such request per
    fault; 26 of them in a structured fuzz run (seed 1) left a single-node Kafka 4.4 not
    answering at all. Refused here, never forwarded, naming the field."""
    out: dict[int, tuple[ErrorCode, str]] = {}
    for i, r in enumerate(request.resources):
        bad = next((c for c in r.configs if int(c.config_operation) not in CONFIG_OPERATIONS), None)
        if bad is not None:
            out[i] = (ErrorCode.invalid_request, f"Unknown config_operation {int(bad.config_operation)} for config "
                      f"{shown(bad.name)!r} of resource {shown(r.resource_name)!r} (0-3: SET, "
                      f"DELETE, APPEND, SUBTRACT).")
    return out


def judge_configs(api_key: int, request: Any, policy: Policy | None) -> Verdict | None:
    """AlterConfigs / IncrementalAlterConfigs: an unknown config operation (always), then the
    topic-config bounds (with a policy)."""
    if api_key not in (ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS):
        return None
    verdict = Verdict()
    if api_key == INCREMENTAL_ALTER_CONFIGS:
        _add(verdict, unknown_config_operations(request), RULE_CONFIG_OPERATION)
    if policy is not None:
        _add(verdict, safeguards.alter_configs(policy.rules, request, api_key == INCREMENTAL_ALTER_CONFIGS),
             RULE_SAFEGUARD)
    return verdict if verdict.entries else None
