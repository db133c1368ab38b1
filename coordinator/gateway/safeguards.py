"""Safeguards a platform team sets on forwarded admin requests, as Kafka's
``create.topic.policy.class.name`` / ``alter.config.policy.class.name`` hooks and the
Kafka-protocol gateways offer them.

Rules:
- Settings (defaults are Kafka's own limits, so nothing Kafka accepts is refused by default):
  ``safeguard.topic.max.partitions`` (a topic created, or grown by CreatePartitions),
  ``safeguard.request.max.partitions`` (summed over a CreateTopics or CreatePartitions;
  Kafka's 10,000), ``safeguard.topic.max.replication.factor``,
  ``safeguard.topic.name.pattern`` (a regex the whole new topic name must match; empty: any),
  ``safeguard.topic.config.bounds`` (``NAME=MIN:MAX`` items, either side may be empty: numeric
  topic configs set by CreateTopics, AlterConfigs or IncrementalAlterConfigs SET),
  ``safeguard.delete.topics.deny.pattern`` (a regex: DeleteTopics of a matching name is
  refused; ``.*`` disables DeleteTopics), ``safeguard.controller.mutation.rate`` (KIP-599:
  partitions created, added or deleted per second per principal; 0: unlimited).
- Scope: each is set for the process (``--config safeguard.X=V``), per listener
  (``--config listener.name.<listener>.safeguard.X=V``) or per principal
  (``--config principal.<User:name>.safeguard.X=V``); the principal's wins over the
  listener's, which wins over the process's.
- A refusal is POLICY_VIOLATION (44) for that topic or resource, with a message naming the
  setting, the limit and the value (as a Kafka policy's PolicyViolationException does); a
  request-wide one (``safeguard.request.max.partitions``) answers every topic. The mutation
  rate answers THROTTLING_QUOTA_EXCEEDED (89) with a throttle time, on CreateTopics v6+,
  CreatePartitions v3+ and DeleteTopics v5+ as Kafka's strict quota does: a topic is
  accepted while the principal's bucket is not in debt, and takes its partitions from it
  (it may go into debt); later topics are refused with the time until the debt is paid.
  Older versions are not throttled here (Kafka throttles them silently, after the fact).
- ``validate_only`` gets the same answer (Kafka runs policies on validation too); it takes
  nothing from the mutation bucket and is never throttled (Kafka's quota is unbounded there).
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kio.schema.errors import ErrorCode

from .admin_limits import requested_partitions, shown

PREFIX = "safeguard."
RULE_SAFEGUARD = "safeguard"          # metric label value
RULE_QUOTA = "controller_mutation_rate"
MAX_BUCKETS = 10_000                  # principals with a mutation bucket (the oldest are dropped)

_FIELDS = {
    "topic.max.partitions": "topic_max_partitions",
    "request.max.partitions": "request_max_partitions",
    "topic.max.replication.factor": "topic_max_replication_factor",
    "topic.name.pattern": "topic_name_pattern",
    "topic.config.bounds": "topic_config_bounds",
    "delete.topics.deny.pattern": "delete_topics_deny_pattern",
    "controller.mutation.rate": "controller_mutation_rate",
}


@dataclass(frozen=True)
class Rules:
    topic_max_partitions: int = 2**31 - 1
    request_max_partitions: int = 10_000
    topic_max_replication_factor: int = 32767
    topic_name_pattern: str = ""
    topic_config_bounds: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)
    delete_topics_deny_pattern: str = ""
    controller_mutation_rate: float = 0.0
    scopes: Mapping[str, str] = field(default_factory=dict)     # setting -> where it was set

    def scope(self, setting: str) -> str:
        return self.scopes.get(setting, "process")

    def name_allowed(self, name: str) -> bool:
        return not self.topic_name_pattern or re.fullmatch(self.topic_name_pattern, name) is not None

    def delete_denied(self, name: str) -> bool:
        return bool(self.delete_topics_deny_pattern) and re.fullmatch(self.delete_topics_deny_pattern, name) is not None

    def config_error(self, name: str, value: str | None) -> str | None:
        bounds = self.topic_config_bounds.get(name)
        if bounds is None or value is None:
            return None
        low, high = bounds
        try:
            number = float(value)
        except ValueError:
            return None          # not a number: the upstream's own validation answers it
        if (low is not None and number < low) or (high is not None and number > high):
            return (f"kcoord safeguard safeguard.topic.config.bounds ({self.scope('topic.config.bounds')}): "
                    f"{shown(name)}={shown(value)} is outside "
                    f"[{'' if low is None else _num(low)}, {'' if high is None else _num(high)}]")
        return None

    def violation(self, setting: str, what: str, limit: object) -> str:
        return f"kcoord safeguard safeguard.{setting} ({self.scope(setting)}): {what}, at most {limit}"


def _num(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


def _bounds(text: str) -> dict[str, tuple[float | None, float | None]]:
    out: dict[str, tuple[float | None, float | None]] = {}
    for item in text.split(",") if isinstance(text, str) else text:
        item = item.strip()
        if not item:
            continue
        name, sep, span = item.rpartition("=")
        low, colon, high = span.partition(":")
        if not sep or not colon or not name:
            raise ValueError(f"safeguard.topic.config.bounds: {item!r} is not NAME=MIN:MAX")
        out[name.strip()] = (float(low) if low.strip() else None, float(high) if high.strip() else None)
    return out


def _apply(rules: Rules, key: str, value: Any, scope: str) -> Rules:
    name = _FIELDS.get(key)
    if name is None:
        raise ValueError(f"unknown safeguard setting {PREFIX}{key} ({scope}); known: "
                         f"{', '.join(PREFIX + k for k in _FIELDS)}")
    try:
        if name == "topic_config_bounds":
            parsed: Any = _bounds(value) if isinstance(value, str) else _bounds(",".join(value))
        elif name in ("topic_name_pattern", "delete_topics_deny_pattern"):
            parsed = str(value)
            re.compile(parsed)
        elif name == "controller_mutation_rate":
            parsed = float(value)
        else:
            parsed = int(value)
    except (ValueError, re.error) as e:   # re.error is not a ValueError
        raise ValueError(f"{PREFIX}{key} ({scope}) = {value!r}: {e}") from None
    return replace(rules, **{name: parsed, "scopes": {**rules.scopes, key: scope}})


def process_rules(config: Any) -> Rules:
    """The process-wide rules from CoordinatorConfig's ``safeguard_*`` fields."""
    rules = Rules()
    for key, name in _FIELDS.items():
        value = getattr(config, "safeguard_" + name, None)
        if value is not None and value != getattr(Rules, name, None) and not (name == "topic_config_bounds"
                                                                              and not value):
            rules = _apply(rules, key, value, "process")
    return rules


class Safeguards:
    """The rules of each (listener, principal), resolved once and cached, and the mutation
    buckets per principal."""

    def __init__(self, base: Rules, settings: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.base = base
        self._listeners: dict[str, dict[str, str]] = {}
        self._principals: dict[str, dict[str, str]] = {}
        for key, value in (settings or {}).items():
            if key.lower().startswith("listener.name.") and f".{PREFIX}" in key:
                listener, _, rest = key[len("listener.name."):].partition(f".{PREFIX}")
                self._listeners.setdefault(listener.upper(), {})[rest] = value
            elif key.startswith("principal.") and f".{PREFIX}" in key:
                principal, _, rest = key[len("principal."):].partition(f".{PREFIX}")
                self._principals.setdefault(principal, {})[rest] = value
        for scope, table in (("listener", self._listeners), ("principal", self._principals)):
            for who, items in table.items():      # a bad name or value refuses to start
                for key, value in items.items():
                    _apply(base, key, value, f"{scope} {who}")
        self._cache: dict[tuple[str, str | None], Rules] = {}
        self._buckets: dict[str, list[float]] = {}      # principal -> [tokens, last]
        self._clock = clock

    @property
    def scoped(self) -> bool:
        return bool(self._listeners or self._principals)

    def rules(self, listener: str, principal: str | None) -> Rules:
        key = (listener, principal)
        rules = self._cache.get(key)
        if rules is None:
            rules = self.base
            for scope, items in ((f"listener {listener}", self._listeners.get(listener.upper())),
                                 (f"principal {principal}", self._principals.get(principal or ""))):
                for k, v in (items or {}).items():
                    rules = _apply(rules, k, v, scope)
            if len(self._cache) >= 1024:
                self._cache.clear()
            self._cache[key] = rules
        return rules

    def take(self, principal: str, rate: float, partitions: int, strict: bool = True) -> float:
        """KIP-599's strict quota: 0 if the principal's bucket is not in debt (then it takes
        ``partitions``, possibly into debt), else the seconds until the debt is paid. The
        bucket holds at most one second's worth (``rate``). Not ``strict`` (Kafka's
        permissive quota): always takes, and returns the seconds until the debt is paid."""
        now = self._clock()
        bucket = self._buckets.get(principal)
        if bucket is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._buckets.pop(next(iter(self._buckets)))
            bucket = self._buckets[principal] = [rate, now]
        tokens = min(rate, bucket[0] + (now - bucket[1]) * rate)
        bucket[1] = now
        if not strict:
            bucket[0] = tokens - partitions
            return max(0.0, -bucket[0] / rate)
        if tokens < 0:
            bucket[0] = tokens
            return -tokens / rate
        bucket[0] = tokens - partitions
        return 0.0


# --- per-API rules ---------------------------------------------------------------------------

Answer = tuple[ErrorCode, str]


def create_topics(rules: Rules, request: Any, skip: set[int], default_partitions: int) -> tuple[Answer | None,
                                                                                                dict[int, Answer]]:
    """(request-wide refusal, per-topic refusals) of a CreateTopics."""
    topics = [(i, t) for i, t in enumerate(request.topics) if i not in skip]
    total = sum(requested_partitions(t, default_partitions) for _, t in topics)
    if total > rules.request_max_partitions:
        return (ErrorCode.policy_violation, rules.violation(
            "request.max.partitions", f"the request asks for {total} partitions", rules.request_max_partitions)), {}
    out: dict[int, Answer] = {}
    for i, t in topics:
        message = None
        partitions = requested_partitions(t, default_partitions)
        rf = len(t.assignments[0].broker_ids) if t.assignments else t.replication_factor
        if not rules.name_allowed(t.name):
            message = rules.violation("topic.name.pattern", f"topic name {shown(t.name)!r} does not match",
                                      repr(rules.topic_name_pattern)).replace(", at most", ", the pattern is")
        elif partitions > rules.topic_max_partitions:
            message = rules.violation("topic.max.partitions", f"topic {shown(t.name)} asks for {partitions} partitions",
                                      rules.topic_max_partitions)
        elif rf > rules.topic_max_replication_factor:
            message = rules.violation("topic.max.replication.factor",
                                      f"topic {shown(t.name)} asks for a replication factor of {rf}",
                                      rules.topic_max_replication_factor)
        else:
            message = next(filter(None, (rules.config_error(c.name, c.value) for c in t.configs)), None)
        if message is not None:
            out[i] = (ErrorCode.policy_violation, message)
    return None, out


def create_partitions(rules: Rules, request: Any, skip: set[int],
                      current: Callable[[str], int | None]) -> tuple[Answer | None, dict[int, Answer]]:
    topics = [(i, t) for i, t in enumerate(request.topics) if i not in skip]
    added = sum(max(0, t.count - (current(t.name) or 1)) for _, t in topics)
    if added > rules.request_max_partitions:
        return (ErrorCode.policy_violation, rules.violation(
            "request.max.partitions", f"the request adds {added} partitions", rules.request_max_partitions)), {}
    return None, {i: (ErrorCode.policy_violation, rules.violation(
        "topic.max.partitions", f"topic {shown(t.name)} would have {t.count} partitions", rules.topic_max_partitions))
        for i, t in topics if t.count > rules.topic_max_partitions}


def delete_topics(rules: Rules, names: list[str | None], skip: set[int]) -> dict[int, Answer]:
    """DeleteTopics against the deny pattern. A topic named by an id kcoord's view does not
    know yet (``None``) is refused while a pattern is set: it cannot be told apart."""
    if not rules.delete_topics_deny_pattern:
        return {}
    unknown = "(an id kcoord does not know yet)"
    return {i: (ErrorCode.policy_violation, rules.violation(
        "delete.topics.deny.pattern", f"topic {shown(name) if name is not None else unknown} "
        f"may not be deleted through kcoord", repr(rules.delete_topics_deny_pattern)).replace(
            ", at most", ", the pattern is"))
        for i, name in enumerate(names) if i not in skip and (name is None or rules.delete_denied(name))}


TOPIC_RESOURCE = 2
SET = 0


def alter_configs(rules: Rules, request: Any, incremental: bool) -> dict[int, Answer]:
    if not rules.topic_config_bounds:
        return {}
    out: dict[int, Answer] = {}
    for i, r in enumerate(request.resources):
        if int(r.resource_type) != TOPIC_RESOURCE:
            continue
        for c in r.configs:
            if incremental and int(c.config_operation) != SET:
                continue
            message = rules.config_error(c.name, c.value)
            if message is not None:
                out[i] = (ErrorCode.policy_violation, f"{message} (topic {shown(r.resource_name)})")
                break
    return out
