"""Regex subscriptions (KIP-848 v1, KIP-1082).

Kafka compiles subscriptions with RE2/J and resolves them with `matches()`, a
*full* match: `^topic` does not match `topic-1` (librdkafka and franz-go users hit
this; reference §4.3 step 8). google-re2 gives the same engine and `fullmatch`.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable

import re2
from kio.schema.errors import ErrorCode

from .errors import ApiError


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors are returned to the client, not logged by RE2


@functools.lru_cache(maxsize=4096)
def compile_regex(regex: str):
    try:
        return re2.compile(regex, _OPTIONS)
    except re2.error as e:
        raise ApiError(ErrorCode.invalid_regular_expression,
                       f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e.args[0].decode() if isinstance(e.args[0], bytes) else e}.") from e


def resolve(regex: str, topic_names: Iterable[str]) -> frozenset[str]:
    pattern = compile_regex(regex)
    return frozenset(name for name in topic_names if pattern.fullmatch(name) is not None)
