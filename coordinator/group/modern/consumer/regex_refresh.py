"""When a consumer group's regular-expression subscriptions (KIP-848 `SubscribedTopicRegex`)
are resolved again, and what a resolution writes.

Rules (Kafka's `GroupMetadataManager.maybeUpdateRegularExpressions` and
`handleRegularExpressionsResult`):
- a group re-resolves when one of its regexes is unresolved, when topics were created
  since its oldest resolution, or every `consumer_regex_refresh_interval_ms`; never more
  often than `consumer_regex_batch_refresh_min_interval_ms`;
- resolution runs as its own operation (the `regex-refresh` timer kind), as Kafka runs it
  as a background task, never inside the heartbeat that asked for it;
- it writes one record per still-subscribed regex, and a new group epoch only when a
  resolution or the group's metadata hash changed;
- with an authorizer (KAFKA-18813, Kafka 4.0), every regex of the group is resolved with
  the rights of the member whose heartbeat scheduled the refresh: topics it may not DESCRIBE
  are dropped (Kafka's `refreshRegularExpressions` authorizes with that heartbeat's request
  context). The heartbeat's `AuthorizedRequestContext.topic_filter` is kept for the group
  until the refresh runs (soft state, as Kafka's refresh task holds the context); a refresh scheduled
  by a metadata update runs with the filter of the last heartbeat that asked for one. A
  shard whose service authorizes (`require_topic_filter`) never resolves without a filter:
  a refresh with none yet (after a load, before any heartbeat) is skipped, and the next
  heartbeat schedules it again. Without an authorizer nothing of this runs.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from ....config import CoordinatorConfig
from ... import record_helpers as rh
from ...errors import ApiError
from ...result import Result, ScheduleTimer, TimerOp
from ...timers import assignment_key, regex_refresh_key
from . import regex as regexes
from .group import ConsumerGroup, ResolvedRegularExpression
from .membership import metadata_hash

if TYPE_CHECKING:
    from ...context import TopicFilter
    from .view import ConsumerView

# shard -> {group id -> the topic filter of the heartbeat that last asked for a refresh}; a
# shard is listed only once its service authorizes (require_topic_filter).
_FILTERS: weakref.WeakKeyDictionary[object, dict[str, TopicFilter]] = weakref.WeakKeyDictionary()


def require_topic_filter(shard: object) -> None:
    """The service authorizes: regexes of this shard's groups resolve only with a member's
    topic filter."""
    _FILTERS.setdefault(shard, {})


def remember_filter(shard: object, group_id: str, topic_filter: TopicFilter) -> None:
    """A heartbeat with this filter asked for a refresh of the group's regexes."""
    filters = _FILTERS.get(shard)
    if filters is not None:
        filters[group_id] = topic_filter


def refresh_timer(config: CoordinatorConfig, group: ConsumerGroup, now_ms: int, new_topics_version: int,
                  new_regex: str | None = None) -> ScheduleTimer | None:
    """The refresh to schedule, or None. `new_topics_version`: the last metadata image
    version that created topics; `new_regex`: a regex this very heartbeat subscribes to."""
    if not group.regex_subscribers and new_regex is None:
        return None
    resolved = group.resolved_regexes
    last_refresh = max((r.timestamp_ms for r in resolved.values()), default=0)
    unresolved = new_regex is not None or any(r not in resolved for r in group.regex_subscribers)
    stale_version = min((r.version for r in resolved.values()), default=0)
    new_topics = stale_version < new_topics_version
    periodic = now_ms > last_refresh + config.consumer_regex_refresh_interval_ms
    if not (unresolved or new_topics or periodic):
        return None
    deadline = max(now_ms, last_refresh + config.consumer_regex_batch_refresh_min_interval_ms)
    return ScheduleTimer(regex_refresh_key(group.group_id), deadline)


def refresh(shard: ConsumerView, group: ConsumerGroup, now_ms: int) -> Result:
    """Resolve every regex of the group against the current topics."""
    gid = group.group_id
    image = shard.image
    records: list = []
    changed = False
    new_resolved = dict(group.resolved_regexes)
    filters = _FILTERS.get(shard)
    topic_filter: TopicFilter | None = None
    if filters is not None:
        if not group.regex_subscribers:
            filters.pop(gid, None)     # no regex left: nothing to filter (the rest runs as before)
        elif (topic_filter := filters.get(gid)) is None:
            shard.log.debug("[GroupId %s] regex refresh skipped: no member's rights known yet", gid)
            return Result()
    topic_names = list(image.topics_by_name)
    excluded = regexes.excluded_topics(shard.config)  # never the state topic
    matched: dict[str, frozenset[str]] = {}
    for regex in group.regex_subscribers:
        try:
            matched[regex] = regexes.resolve(regex, topic_names, excluded)
        except ApiError:
            continue
    if topic_filter is not None:
        allowed = topic_filter(frozenset().union(*matched.values())) if matched else frozenset()
        matched = {regex: topics & allowed for regex, topics in matched.items()}
    for regex, topics in matched.items():
        resolved = ResolvedRegularExpression(topics, image.version, now_ms)
        # Kafka compares with `ResolvedRegularExpression.EMPTY` when the regex had no
        # resolution yet: a first resolution that matches nothing is no change.
        changed |= regexes.resolution_changed(group.resolved_regexes.get(regex), topics)
        new_resolved[regex] = resolved
        records.append(rh.regex_record(gid, regex, resolved))
    names = set(group.subscribed_topic_names)
    for regex in group.regex_subscribers:
        if regex in new_resolved:
            names |= new_resolved[regex].topics
    new_hash = metadata_hash(image, names)
    timers: list[TimerOp] = []
    if changed or new_hash != group.metadata_hash:
        records.append(rh.group_epoch_record(gid, group.group_epoch + 1, new_hash))
        timers.append(ScheduleTimer(assignment_key(gid), now_ms))
    return Result(records=records, timers=timers)
