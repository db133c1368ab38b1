"""Per-group configuration in the pure core: Kafka 4.4's GroupConfig validation, the
IncrementalAlterConfigs / AlterConfigs set arithmetic, the record (type 1200) replayed on a
reload, and the configs' lifetime apart from the group's (DeleteGroups leaves them)."""
from __future__ import annotations

import pytest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.group.configs.keys import KEYS, validate
from coordinator.group.configs.ops import APPEND, DELETE, SET, SUBTRACT, AlterGroupConfigs, ReadGroupConfigs
from coordinator.group.errors import ApiError
from coordinator.group.timers import assignment_key, session_timer
from records import UnknownRecord, decode_record, encode_record
from records.group_config_records import GROUP_CONFIG
from tests.unit.group.context import ShardContext, topic

CONFIG = CoordinatorConfig()


def refusal(configs: dict[str, str]) -> tuple[ErrorCode, str]:
    with pytest.raises(ApiError) as e:
        validate(configs, CONFIG)
    return e.value.code, e.value.message


@pytest.mark.parametrize("configs, message", [
    ({"consumer.foo": "1"}, "Unknown group config name: consumer.foo"),
    ({"consumer.session.timeout.ms": "abc"},
     "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ({"consumer.session.timeout.ms": "0"},
     "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"),
    ({"consumer.session.timeout.ms": "44999"},
     "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    ({"consumer.heartbeat.interval.ms": "15001"},
     "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    ({"consumer.assignment.interval.ms": "15001"},
     "consumer.assignment.interval.ms must be in the range 0 to 15000 inclusive."),
    ({"streams.num.standby.replicas": "3"}, "streams.num.standby.replicas must be less than or equal to 2"),
    # GroupConfig.validateIntMin against group.streams.min.task.offset.interval.ms (15000)
    ({"streams.task.offset.interval.ms": "14999"},
     "streams.task.offset.interval.ms must be greater than or equal to 15000"),
    ({"consumer.assignor.offload.enable": "yes"},
     "Invalid value yes for configuration consumer.assignor.offload.enable: Expected value to be either true or false"),
    ({"share.isolation.level": "dirty"},
     "Invalid value dirty for configuration share.isolation.level: String must be one of: read_committed, "
     "read_uncommitted"),
    ({"streams.rack.aware.assignment.tags": "zone,zone"},
     "streams.rack.aware.assignment.tags must not contain duplicate tag keys."),
    # Kafka 4.4 splits keeping empty pieces, checks duplicates first, then ValidList's rules
    ({"streams.rack.aware.assignment.tags": "zone,"},
     "Configuration 'streams.rack.aware.assignment.tags' values must not be empty."),
    ({"streams.rack.aware.assignment.tags": " , zone"},
     "Configuration 'streams.rack.aware.assignment.tags' values must not be empty."),
    ({"streams.rack.aware.assignment.tags": "zone,,", "consumer.session.timeout.ms": "abc"},
     "streams.rack.aware.assignment.tags must not contain duplicate tag keys."),
    # kcoord's own bound: what Kafka Streams can send (5 client tags, keys of 20 characters)
    ({"streams.rack.aware.assignment.tags": "a,b,c,d,e,f"},
     "streams.rack.aware.assignment.tags names 6 tag keys; at most 5 can be met, as Kafka Streams sends at most "
     "5 client tags (client.tag.<tagKey>)."),
    ({"streams.rack.aware.assignment.tags": "zone," + "k" * 21},
     "streams.rack.aware.assignment.tags names the tag key 'kkkkkkkkkkkkkkkkkkkk...' of 21 characters; Kafka "
     "Streams' client tag keys have at most 20."),
    ({"errors.deadletterqueue.topic.name": "__dlq"},
     "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"),
])
def test_validation_refuses_as_kafka(configs, message):
    assert refusal(configs) == (ErrorCode.invalid_config, message)


def test_session_must_exceed_heartbeat_with_the_broker_value_standing_in():
    config = CoordinatorConfig(consumer_max_heartbeat_interval_ms=60_000)
    with pytest.raises(ApiError, match="consumer.session.timeout.ms must be greater than "
                                       "consumer.heartbeat.interval.ms"):
        validate({"consumer.heartbeat.interval.ms": "45000"}, config)   # session: the broker's 45000
    assert validate({"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"},
                    config) == {"consumer.session.timeout.ms": 50000, "consumer.heartbeat.interval.ms": 6000}


def test_bounds_are_kcoords_own_configuration():
    config = CoordinatorConfig(consumer_min_session_timeout_ms=10_000)
    assert validate({"consumer.session.timeout.ms": "10000"}, config) == {"consumer.session.timeout.ms": 10000}
    assert KEYS["consumer.session.timeout.ms"].default_text(config) == "45000"


def test_streams_bounds_and_defaults_are_kcoords_own_configuration():
    """As Kafka's `group.streams.min.session.timeout.ms` and friends bound `streams.*` keys."""
    with pytest.raises(ApiError):
        validate({"streams.session.timeout.ms": "6000"}, CoordinatorConfig())
    config = CoordinatorConfig(streams_min_session_timeout_ms=6_000, streams_min_heartbeat_interval_ms=500,
                               streams_initial_rebalance_delay_ms=0)
    assert validate({"streams.session.timeout.ms": "6000", "streams.heartbeat.interval.ms": "500"}, config) == {
        "streams.session.timeout.ms": 6000, "streams.heartbeat.interval.ms": 500}
    assert KEYS["streams.initial.rebalance.delay.ms"].default_text(config) == "0"


def alter(ctx: ShardContext, group: str, *changes, incremental=True, validate_only=False):
    req = AlterGroupConfigs(group, tuple(changes), incremental, validate_only)
    return ctx.apply(ctx.shard.alter_group_configs(ctx.ctx(), req, ctx.now_ms))


def read(shard, *groups):
    return shard.read_group_configs(None, ReadGroupConfigs(tuple(groups)), 0).response


def test_set_delete_and_reload():
    ctx = ShardContext()
    assert alter(ctx, "g", ("consumer.session.timeout.ms", SET, "50000"),
                 ("streams.rack.aware.assignment.tags", SET, "zone,rack")).response == (ErrorCode.none, None)
    assert alter(ctx, "g", ("streams.rack.aware.assignment.tags", SET, "rack")).response[0] == ErrorCode.none
    assert read(ctx.shard, "g", "h") == {"g": {"consumer.session.timeout.ms": "50000",
                                               "streams.rack.aware.assignment.tags": "rack"}, "h": {}}
    assert read(ctx.reload(), "g")["g"] == read(ctx.shard, "g")["g"]
    assert ctx.shard.group_configs.value("g", "consumer.session.timeout.ms", 45000) == 50000
    alter(ctx, "g", ("consumer.session.timeout.ms", DELETE, None), ("streams.rack.aware.assignment.tags", DELETE, None))
    assert ctx.log[-1][2] is None           # the emptied set is a tombstone
    assert read(ctx.reload(), "g") == {"g": {}}
    assert ctx.shard.group_configs.groups() == []


def test_refusals_write_nothing():
    ctx = ShardContext()
    cases = [
        (("", ("consumer.session.timeout.ms", SET, "50000")),
         (ErrorCode.invalid_request, "Default group resources are not allowed.")),
        (("g", ("consumer.session.timeout.ms", SET, "1"), ("consumer.session.timeout.ms", DELETE, None)),
         (ErrorCode.invalid_request, "Error due to duplicate config keys")),
        (("g", ("consumer.session.timeout.ms", APPEND, "1")),
         (ErrorCode.invalid_config, "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.")),
        # Kafka 4.4 splits no group key, the list one included, and checks this before the name
        (("g", ("streams.rack.aware.assignment.tags", APPEND, "zone")),
         (ErrorCode.invalid_config, "Can't APPEND to key streams.rack.aware.assignment.tags because its type is "
                                    "not LIST.")),
        (("g", ("streams.rack.aware.assignment.tags", SUBTRACT, "zone")),
         (ErrorCode.invalid_config, "Can't SUBTRACT to key streams.rack.aware.assignment.tags because its type is "
                                    "not LIST.")),
        (("g", ("consumer.no.such.key", SUBTRACT, "x")),
         (ErrorCode.invalid_config, "Can't SUBTRACT to key consumer.no.such.key because its type is not LIST.")),
        (("g", ("consumer.session.timeout.ms", SET, None)),
         (ErrorCode.invalid_request, "Null value not supported for : consumer.session.timeout.ms")),
        (("g", ("bogus", SET, "1")), (ErrorCode.invalid_config, "Unknown group config name: bogus")),
        (("g", ("errors.deadletterqueue.topic.name", SET, "x" * 40_000)),
         (ErrorCode.invalid_config, "The value of errors.deadletterqueue.topic.name is longer than 32767 bytes")),
    ]
    for (group, *changes), expected in cases:
        assert alter(ctx, group, *changes).response == expected
    assert alter(ctx, "g", ("consumer.session.timeout.ms", SET, "50000"), validate_only=True).response[0] == 0
    assert ctx.log == []


def test_legacy_alter_configs_replaces_the_whole_set():
    ctx = ShardContext()
    alter(ctx, "g", ("consumer.session.timeout.ms", SET, "50000"), ("consumer.heartbeat.interval.ms", SET, "6000"))
    alter(ctx, "g", ("consumer.assignment.interval.ms", SET, "0"), incremental=False)
    assert read(ctx.shard, "g")["g"] == {"consumer.assignment.interval.ms": "0"}


def test_configs_outlive_delete_groups():
    ctx = ShardContext()
    alter(ctx, "g", ("consumer.session.timeout.ms", SET, "50000"))
    assert ctx.heartbeat("g", "m1", 0, topics=("t",)).error_code == ErrorCode.none
    ctx.heartbeat("g", "m1", -1)
    response = ctx.apply(ctx.shard.delete_groups(ctx.ctx(2), DeleteGroupsRequest(groups_names=("g",)),
                                                 ctx.now_ms)).response
    assert response.results[0].error_code == ErrorCode.none
    assert "g" not in ctx.reload().groups
    assert read(ctx.reload(), "g")["g"] == {"consumer.session.timeout.ms": "50000"}


def test_the_record_is_skipped_as_unknown_by_a_codec_without_it():
    ctx = ShardContext()
    alter(ctx, "g", ("consumer.session.timeout.ms", SET, "50000"))
    _, key, value = ctx.log[0]
    assert int.from_bytes(key[:2], "big") == GROUP_CONFIG
    unknown = UnknownRecord(GROUP_CONFIG, key, value)
    shard = ShardContext().shard
    shard.replay(unknown, 0)
    assert shard.unknown_record_types[GROUP_CONFIG] == 1
    assert encode_record(decode_record(key, value)) == (key, value)


def session_deadline(ctx: ShardContext, group: str, member: str) -> int:
    return ctx.timers[session_timer(group, member)][0]


def test_running_groups_take_the_session_timeout_and_heartbeat_floor_at_once():
    ctx = ShardContext(topic("t", 2))
    joined = ctx.heartbeat("g", "m1", 0, topics=("t",))
    assert session_deadline(ctx, "g", "m1") == ctx.now_ms + CONFIG.consumer_session_timeout_ms
    alter(ctx, "g", ("consumer.session.timeout.ms", SET, "55000"), ("consumer.heartbeat.interval.ms", SET, "7000"))
    answer = ctx.heartbeat("g", "m1", joined.member_epoch)
    assert session_deadline(ctx, "g", "m1") == ctx.now_ms + 55_000
    assert answer.heartbeat_interval.total_seconds() * 1000 == 7000    # adaptive, floored by the group's
    other = ctx.heartbeat("h", "m2", 0, topics=("t",))                 # another group: the broker's
    assert other.heartbeat_interval.total_seconds() * 1000 in (CONFIG.consumer_heartbeat_pending_interval_ms,
                                                             CONFIG.consumer_heartbeat_stable_interval_ms)
    assert session_deadline(ctx, "h", "m2") == ctx.now_ms + CONFIG.consumer_session_timeout_ms
    fixed = ShardContext(topic("t", 2), config=CoordinatorConfig(consumer_heartbeat_policy="fixed"))
    alter(fixed, "g", ("consumer.heartbeat.interval.ms", SET, "6000"))
    assert fixed.heartbeat("g", "m1", 0, topics=("t",)).heartbeat_interval.total_seconds() == 6.0


def test_the_assignment_interval_paces_the_group():
    ctx = ShardContext(topic("t", 4))
    alter(ctx, "g", ("consumer.assignment.interval.ms", SET, "15000"))
    computed_at = ctx.now_ms
    ctx.heartbeat("g", "m1", 0, topics=("t",))                          # the first target: at once
    ctx.now_ms += 1000
    ctx.heartbeat("g", "m2", 0, topics=("t",))                          # a new epoch within the interval
    assert ctx.timers[assignment_key("g")][0] == computed_at + 15_000    # the broker's would be 100 ms


def test_a_stored_value_outside_todays_bounds_is_used_clamped():
    ctx = ShardContext()
    alter(ctx, "g", ("consumer.session.timeout.ms", SET, "60000"))
    narrower = CoordinatorConfig(consumer_max_session_timeout_ms=50_000)
    shard = ShardContext(config=narrower).shard
    for offset, key, value in ctx.log:          # a restart under narrower bounds
        shard.replay(decode_record(key, value), offset)
    assert shard.group_configs.value("g", "consumer.session.timeout.ms", 45_000) == 50_000
    assert read(shard, "g")["g"] == {"consumer.session.timeout.ms": "60000"}   # describe shows what was set


def test_a_stored_tag_list_past_kcoords_bound_falls_back_to_the_default(caplog):
    """Replayed values skip validate: a list set by another writer (50,000 keys) is not used,
    and the log says so."""
    from coordinator.group.configs.store import GroupConfigStore
    store = GroupConfigStore(CoordinatorConfig(streams_rack_aware_assignment_tags=("zone",)))
    store.replace("g", {"streams.rack.aware.assignment.tags": ",".join(f"k{i}" for i in range(50_000)),
                        "streams.num.standby.replicas": "1"})
    assert "'streams.rack.aware.assignment.tags' for group 'g' is not used (" in caplog.text
    assert "names 50000 tag keys" in caplog.text
    assert store.value("g", "streams.rack.aware.assignment.tags", ("zone",)) == ("zone",)
    assert store.value("g", "streams.num.standby.replicas", 0) == 1
    assert validate({"streams.rack.aware.assignment.tags": " zone , rack "}, CONFIG) == {
        "streams.rack.aware.assignment.tags": ("zone", "rack")}


@pytest.mark.parametrize("text, keys", [
    (" zone , rack ", ("zone", "rack")),
    ("\x00zone\x1f", ("zone",)),            # String.trim() drops every char <= ' '
    ("zone,\u00a0", ("zone", "\u00a0")),     # not Java whitespace: a key
    ("zone,\x1cb", ("zone", "\x1cb")),       # Java's \s is [ \t\n\x0B\f\r]
    ("\u00a0", ("\u00a0",)),
    ("  ", ()),
])
def test_tag_lists_split_as_java_does(text, keys):
    assert validate({"streams.rack.aware.assignment.tags": text}, CONFIG) == {
        "streams.rack.aware.assignment.tags": keys}

