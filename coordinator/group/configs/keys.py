"""The group config keys of Kafka 4.4 (`GroupConfig`), their types, defaults and validation.

Rules of this module:
- The table is Kafka 4.4's `GroupConfig.CONFIG_DEF`: every key of every group type, so tools
  see the keys of the types kcoord does not serve (share, streams) validated and stored as
  Kafka would. The internal keys (`*.assignor.offload.enable`, `streams.task.offset.interval.ms`,
  `streams.num.warmup.replicas`, `streams.acceptable.recovery.lag`) are settable but not
  described unless named, as Kafka hides internal configs.
- A default is the broker's value: for the consumer keys kcoord's own configuration
  (coordinator/config.py, the `group.consumer.*` settings); for the other types Kafka's
  broker defaults (`GroupCoordinatorConfig`, `ShareGroupConfig`).
- `validate(configs, config)` is Kafka's `GroupConfig.validate`, on the whole set a change
  leaves: unknown names, duplicate client-tag keys, values that do not parse as their type or
  break the key's own validator (Kafka's `ConfigException` messages; kcoord's own bound on the
  client-tag keys, `_list`), then the broker's min/max, then the
  session timeout above the heartbeat interval per group type (the broker's value standing
  in for the one not set). It raises `ApiError(INVALID_CONFIG)` with Kafka's message.
- Pure: no state, no clock.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from kio.schema.errors import ErrorCode

from ...config import CoordinatorConfig
from ..errors import ApiError
from ..streams.client_tags import MAX_CLIENT_TAGS


class ConfigType(IntEnum):
    """DescribeConfigs' ConfigType (v3+, KIP-569)."""
    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    LIST = 7


# Kafka's GroupCoordinatorConfig / ShareGroupConfig bounds for the types kcoord does not serve
# (kcoord has no setting for them): (min, max) of each key.
ASSIGNMENT_INTERVAL_BOUNDS = (0, 15_000)
SHARE_SESSION_BOUNDS = (45_000, 60_000)
SHARE_HEARTBEAT_BOUNDS = (5_000, 15_000)
SHARE_RECORD_LOCK_BOUNDS = (15_000, 60_000)
SHARE_DELIVERY_COUNT_BOUNDS = (2, 10)
SHARE_RECORD_LOCKS_BOUNDS = (100, 10_000)
STREAMS_MAX_STANDBY_REPLICAS = 2
STREAMS_MAX_WARMUP_REPLICAS = 20
STREAMS_MIN_TASK_OFFSET_INTERVAL_MS = 15_000     # group.streams.min.task.offset.interval.ms
INT_MAX = 2**31 - 1
RACK_AWARE_TAGS = "streams.rack.aware.assignment.tags"
MAX_TAG_KEYS = MAX_CLIENT_TAGS                 # Kafka Streams' client tags (_list)
MAX_TAG_KEY_LENGTH = 20
# Kafka 4.4's `group.streams.assignors` (KIP-1357): the names a group may pick; the first is
# the default of `streams.assignor.name`.
STREAMS_ASSIGNORS = ("sticky",)

Bounds = Callable[[CoordinatorConfig], "tuple[int, int]"]


@dataclass(frozen=True, slots=True)
class Key:
    name: str
    type: ConfigType
    default: Callable[[CoordinatorConfig], Any]    # the broker's value (None: no value)
    at_least: int | None = None                    # the key's own validator (ConfigDef.Range.atLeast)
    bounds: Bounds | None = None                   # the broker's min/max (validateValues)
    choices: tuple[str, ...] = ()                  # ConfigDef.ValidString.in
    internal: bool = False
    synonym: str | None = None                     # the broker's config of the same meaning

    def default_text(self, config: CoordinatorConfig) -> str | None:
        return render(self.type, self.default(config))


def _const(value: Any) -> Callable[[CoordinatorConfig], Any]:
    return lambda config: value


def _fixed(bounds: tuple[int, int]) -> Bounds:
    return lambda config: bounds


_I, _B, _S, _L, _LIST = ConfigType.INT, ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.LONG, ConfigType.LIST

KEYS: dict[str, Key] = {k.name: k for k in (
    Key("consumer.session.timeout.ms", _I, lambda c: c.consumer_session_timeout_ms, 1,
        lambda c: (c.consumer_min_session_timeout_ms, c.consumer_max_session_timeout_ms),
        synonym="group.consumer.session.timeout.ms"),
    Key("consumer.heartbeat.interval.ms", _I, lambda c: c.consumer_heartbeat_interval_ms, 1,
        lambda c: (c.consumer_min_heartbeat_interval_ms, c.consumer_max_heartbeat_interval_ms),
        synonym="group.consumer.heartbeat.interval.ms"),
    Key("consumer.assignment.interval.ms", _I, lambda c: c.consumer_assignment_interval_ms, 0,
        _fixed(ASSIGNMENT_INTERVAL_BOUNDS), synonym="group.consumer.assignment.interval.ms"),
    Key("consumer.assignor.offload.enable", _B, _const(True), internal=True,
        synonym="group.consumer.assignor.offload.enable"),
    Key("share.session.timeout.ms", _I, _const(45_000), 1, _fixed(SHARE_SESSION_BOUNDS),
        synonym="group.share.session.timeout.ms"),
    Key("share.heartbeat.interval.ms", _I, _const(5_000), 1, _fixed(SHARE_HEARTBEAT_BOUNDS),
        synonym="group.share.heartbeat.interval.ms"),
    Key("share.record.lock.duration.ms", _I, _const(30_000), 1000, _fixed(SHARE_RECORD_LOCK_BOUNDS),
        synonym="group.share.record.lock.duration.ms"),
    Key("share.delivery.count.limit", _I, _const(5), 2, _fixed(SHARE_DELIVERY_COUNT_BOUNDS),
        synonym="group.share.delivery.count.limit"),
    Key("share.partition.max.record.locks", _I, _const(2000), 100, _fixed(SHARE_RECORD_LOCKS_BOUNDS),
        synonym="group.share.partition.max.record.locks"),
    Key("share.auto.offset.reset", _S, _const("latest")),
    Key("share.isolation.level", _S, _const("read_uncommitted"), choices=("read_committed", "read_uncommitted")),
    Key("share.renew.acknowledge.enable", _B, _const(True)),
    Key("share.assignment.interval.ms", _I, _const(1000), 0, _fixed(ASSIGNMENT_INTERVAL_BOUNDS),
        synonym="group.share.assignment.interval.ms"),
    Key("share.assignor.offload.enable", _B, _const(True), internal=True,
        synonym="group.share.assignor.offload.enable"),
    Key("streams.session.timeout.ms", _I, lambda c: c.streams_session_timeout_ms, 1,
        lambda c: (c.streams_min_session_timeout_ms, c.streams_max_session_timeout_ms),
        synonym="group.streams.session.timeout.ms"),
    Key("streams.heartbeat.interval.ms", _I, lambda c: c.streams_heartbeat_interval_ms, 1,
        lambda c: (c.streams_min_heartbeat_interval_ms, c.streams_max_heartbeat_interval_ms),
        synonym="group.streams.heartbeat.interval.ms"),
    Key("streams.num.standby.replicas", _I, _const(0), 0, _fixed((-(2**31), STREAMS_MAX_STANDBY_REPLICAS)),
        synonym="group.streams.num.standby.replicas"),
    Key("streams.initial.rebalance.delay.ms", _I, lambda c: c.streams_initial_rebalance_delay_ms, 0,
        synonym="group.streams.initial.rebalance.delay.ms"),
    Key("streams.assignment.interval.ms", _I, lambda c: c.streams_assignment_interval_ms, 0,
        _fixed(ASSIGNMENT_INTERVAL_BOUNDS), synonym="group.streams.assignment.interval.ms"),
    Key("streams.assignor.offload.enable", _B, _const(True), internal=True,
        synonym="group.streams.assignor.offload.enable"),
    Key("streams.task.offset.interval.ms", _I, _const(60_000), 1,
        _fixed((STREAMS_MIN_TASK_OFFSET_INTERVAL_MS, INT_MAX)), internal=True,
        synonym="group.streams.task.offset.interval.ms"),
    Key("streams.num.warmup.replicas", _I, _const(2), 0, _fixed((-(2**31), STREAMS_MAX_WARMUP_REPLICAS)),
        internal=True, synonym="group.streams.num.warmup.replicas"),
    Key("streams.rack.aware.assignment.tags", _LIST, lambda c: tuple(c.streams_rack_aware_assignment_tags),
        synonym="group.streams.rack.aware.assignment.tags"),
    Key("streams.acceptable.recovery.lag", _L, _const(10_000), 0, internal=True,
        synonym="group.streams.acceptable.recovery.lag"),
    Key("streams.assignor.name", _S, _const(STREAMS_ASSIGNORS[0]), synonym="group.streams.assignors"),
    Key("errors.deadletterqueue.topic.name", _S, _const("")),
    Key("errors.deadletterqueue.copy.record.enable", _B, _const(False)),
)}

# (session key, heartbeat key) per group type: the session must exceed the interval.
SESSION_OVER_HEARTBEAT = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                          ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
                          ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"))

_DURATION = re.compile(r"^-?P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?$", re.IGNORECASE)


def invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.invalid_config, message)


def render(ctype: ConfigType, value: Any) -> str | None:
    """A parsed value as Kafka's DescribeConfigs writes it (`ConfigDef.convertToString`)."""
    if value is None:
        return None
    if ctype is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if ctype is ConfigType.LIST:
        return ",".join(value)
    return str(value)


def _bad(name: str, value: str, why: str) -> ApiError:
    # Kafka's ConfigException("Invalid value V for configuration K: why")
    return invalid(f"Invalid value {value} for configuration {name}: {why}")


def _number(key: Key, text: str, lo: int, hi: int, kind: str) -> int:
    try:
        n = int(text.strip(), 10)
    except ValueError:
        raise _bad(key.name, text, f"Not a number of type {kind}") from None
    if not lo <= n <= hi:
        raise _bad(key.name, text, f"Not a number of type {kind}")
    return n


def parse(key: Key, text: str) -> Any:
    """Kafka's `ConfigDef.parseType` and the key's own validator, for one value."""
    t = key.type
    if t is ConfigType.INT or t is ConfigType.LONG:
        value: Any = (_number(key, text, -(2**31), INT_MAX, "INT") if t is ConfigType.INT
                      else _number(key, text, -(2**63), 2**63 - 1, "LONG"))
        if key.at_least is not None and value < key.at_least:
            raise _bad(key.name, str(value), f"Value must be at least {key.at_least}")
        return value
    if t is ConfigType.BOOLEAN:
        word = text.strip().lower()
        if word not in ("true", "false"):
            raise _bad(key.name, text, "Expected value to be either true or false")
        return word == "true"
    if t is ConfigType.LIST:
        return _list(key, text)
    value = text.strip()
    if key.choices and value not in key.choices:
        raise _bad(key.name, value, f"String must be one of: {', '.join(key.choices)}")
    if key.name == "share.auto.offset.reset":
        _share_reset(key, value)
    return value


_JAVA_TRIM = "".join(map(chr, range(33)))           # String.trim(): every char <= ' '
_JAVA_COMMA = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")   # "\\s*,\\s*", Java's \s


def _split(text: str) -> tuple[str, ...]:
    # Kafka's LIST: the trimmed text split on commas with the blanks around them, empty pieces
    # kept (`split("\\s*,\\s*", -1)`), so "zone," is ["zone", ""]; Java's trim and \s, not
    # Python's wider whitespace ("zone,\u00a0" is two keys there)
    trimmed = text.strip(_JAVA_TRIM)
    return tuple(_JAVA_COMMA.split(trimmed)) if trimmed else ()


def _list(key: Key, text: str) -> tuple[str, ...]:
    """Kafka 4.4's `ValidList.anyNonDuplicateValues(true, false)`, then kcoord's own bound on
    the client-tag keys: Kafka Streams sends at most 5 client tags with keys of at most 20
    characters (StreamsConfig's MAX_RACK_AWARE_ASSIGNMENT_TAG_LIST_SIZE and _KEY_LENGTH), so a
    longer list could never be met and only costs every heartbeat its status and the assignor
    its spread (50,000 keys: 389 KB of status per heartbeat). The bound is in the parse so a
    stored value past it falls back to the default on a reload too (store.py)."""
    values = _split(text)
    if len(set(values)) != len(values):
        raise invalid(f"Configuration '{key.name}' values must not be duplicated.")
    if "" in values:
        raise invalid(f"Configuration '{key.name}' values must not be empty.")
    if key.name == RACK_AWARE_TAGS:
        if len(values) > MAX_TAG_KEYS:
            raise invalid(f"{key.name} names {len(values)} tag keys; at most {MAX_TAG_KEYS} can be met, as Kafka "
                          f"Streams sends at most {MAX_TAG_KEYS} client tags (client.tag.<tagKey>).")
        long = next((v for v in values if len(v) > MAX_TAG_KEY_LENGTH), None)
        if long is not None:
            raise invalid(f"{key.name} names the tag key '{long[:MAX_TAG_KEY_LENGTH]}...' of {len(long)} "
                          f"characters; Kafka Streams' client tag keys have at most {MAX_TAG_KEY_LENGTH}.")
    return values


def _share_reset(key: Key, value: str) -> None:
    """Kafka's `ShareGroupAutoOffsetResetStrategy.Validator`."""
    low = value.lower()
    if low in ("earliest", "latest"):
        return
    if low.startswith("by_duration:"):
        duration = value[len("by_duration:"):]
        if _DURATION.match(duration) and not duration.startswith("-"):
            return
    raise _bad(key.name, value, f"Invalid value `{value}` for configuration {key.name}. The value must be either "
                                "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def validate(configs: Mapping[str, str], config: CoordinatorConfig) -> dict[str, Any]:
    """Kafka's `GroupConfig.validate` of a group's whole set; returns the parsed values."""
    for name in configs:
        if name not in KEYS:
            raise invalid(f"Unknown group config name: {name}")
    tags = _split(configs.get(RACK_AWARE_TAGS, ""))     # checked before the parse, as Kafka 4.4 does
    if len(set(tags)) != len(tags):
        raise invalid(f"{RACK_AWARE_TAGS} must not contain duplicate tag keys.")
    parsed = {name: parse(KEYS[name], text) for name, text in configs.items()}
    for name, value in parsed.items():
        bounds = KEYS[name].bounds
        if bounds is None:
            continue
        lo, hi = bounds(config)
        if value < lo or value > hi:
            if lo <= -(2**31):
                raise invalid(f"{name} must be less than or equal to {hi}")
            if hi >= INT_MAX:
                raise invalid(f"{name} must be greater than or equal to {lo}")
            raise invalid(f"{name} must be in the range {lo} to {hi} inclusive.")
    for session_key, heartbeat_key in SESSION_OVER_HEARTBEAT:
        if session_key in parsed or heartbeat_key in parsed:
            session = parsed.get(session_key, KEYS[session_key].default(config))
            heartbeat = parsed.get(heartbeat_key, KEYS[heartbeat_key].default(config))
            if session <= heartbeat:
                raise invalid(f"{session_key} must be greater than {heartbeat_key}")
    assignor = parsed.get("streams.assignor.name")
    if assignor is not None and assignor not in STREAMS_ASSIGNORS:
        raise invalid(f"streams.assignor.name '{assignor}' is not a registered task assignor. "
                      f"Registered assignors are: [{', '.join(STREAMS_ASSIGNORS)}].")
    dlq = parsed.get("errors.deadletterqueue.topic.name")
    if dlq and dlq.startswith("__"):
        raise invalid("errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")
    return parsed
