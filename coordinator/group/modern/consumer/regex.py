"""Regex subscriptions (KIP-848 v1, KIP-1082).

Kafka compiles subscriptions with RE2/J and resolves them with `matches()`, a
*full* match: `^topic` does not match `topic-1` (librdkafka and franz-go users hit
this; docs/design/kafka-facts.md §4.3 step 8). google-re2 gives the same engine and `fullmatch`.

Resolution never matches kcoord's state topic: it is kcoord's
`__consumer_offsets`, and a `.*` subscriber must not be handed its partitions
(it would read every group's state). Kafka's `TopicRegexResolver` matches every
name in the metadata image, internal topics included, and then drops only the
topics the member may not DESCRIBE; so kcoord excludes its state topic and
nothing else: an upstream Kafka's own topics match here as they would there.
"""
from __future__ import annotations

import functools
from collections.abc import Collection, Iterable

import re2
from kio.schema.errors import ErrorCode

from ....config import CoordinatorConfig
from ...errors import ApiError

# The state topic as configured by default; `excluded_topics(config)` gives the set for
# any configuration.
DEFAULT_STATE_TOPIC: str = CoordinatorConfig().state_topic
_DEFAULT_EXCLUDED = frozenset({DEFAULT_STATE_TOPIC})


def excluded_topics(config: CoordinatorConfig) -> frozenset[str]:
    """Topic names no regex may match under this configuration: the state topic."""
    if config.state_topic == DEFAULT_STATE_TOPIC:
        return _DEFAULT_EXCLUDED
    return frozenset({config.state_topic})


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors are returned to the client, not logged by RE2


@functools.lru_cache(maxsize=4096)
def compile_regex(regex: str):
    try:
        return re2.compile(regex, _OPTIONS)
    except re2.error as e:
        why = e.args[0].decode() if isinstance(e.args[0], bytes) else e
        raise ApiError(ErrorCode.invalid_regular_expression,
                       f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {why}.") from e


def resolve(regex: str, topic_names: Iterable[str],
            excluded: Collection[str] = _DEFAULT_EXCLUDED) -> frozenset[str]:
    """The topics `regex` fully matches, never one of `excluded` (the state topic; callers
    with a configuration pass `excluded_topics(config)`)."""
    pattern = compile_regex(regex)
    return frozenset(name for name in topic_names
                     if pattern.fullmatch(name) is not None and name not in excluded)


def resolution_changed(old, topics: frozenset[str]) -> bool:
    """Whether a resolution changes the group's subscribed topics. A regex without a
    resolution yet counts as resolved to no topic, as Kafka's `handleRegularExpressionsResult`
    compares with `ResolvedRegularExpression.EMPTY`: a member that joins with a regex
    matching nothing leaves the group epoch alone, and only the resolution that finds
    topics bumps it (ConsumerGroupHeartbeatRequestTest's regex test)."""
    return (old.topics if old is not None else frozenset()) != topics
