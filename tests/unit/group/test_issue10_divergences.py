"""Issue 10 §7: divergences from Kafka 4.3 found by driving kcoord as Kafka's own request
tests do (ConsumerGroupHeartbeatRequestTest, ConsumerGroupDescribeRequestTest), plus the
regex rule of §3 (resolution never matches kcoord's state topic)."""
from __future__ import annotations

from coordinator.group.kio_util import schema
from coordinator.group.modern.consumer import regex as regexes
from coordinator.group.modern.consumer.group import ConsumerGroupState
from records import (
    TRAILING_BYTES,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupRegularExpressionKey,
    decode_record,
)

from .context import ShardContext, ok, topic
from .test_consumer_heartbeat import fast


def _records_since(c: ShardContext, start: int) -> list:
    return [decode_record(k, v, offset=o) for o, k, v in c.log[start:]]


def _group_epoch_records(c: ShardContext, start: int = 0) -> list:
    return [r for r in _records_since(c, start) if isinstance(r.key, ConsumerGroupMetadataKey)]


def _describe(c: ShardContext, group_id: str):
    mod = schema("consumer_group_describe", 1, "request")
    resp = c.call("consumer_group_describe", mod.ConsumerGroupDescribeRequest(
        group_ids=(group_id,), include_authorized_operations=False), 1)
    (g,) = resp.groups
    return g


# ----------------------------------------------------------------- regex join
def test_regex_only_join_writes_the_member_and_no_group_epoch():
    # Kafka: hasMemberSubscriptionChanged is about SubscribedTopicNames only; a new regex
    # is REGEX_UPDATED (unresolved), which does not bump the group epoch.
    c = ShardContext(topic("bar", 2), config=fast())
    r = c.heartbeat("g", "m1", 0, regex="foo*")
    ok(r)
    assert r.member_epoch == 1 and c.assigned(r) == {}
    assert [type(rec.key) for rec in _records_since(c, 0)] == [
        ConsumerGroupMemberMetadataKey, ConsumerGroupCurrentMemberAssignmentKey]
    assert c.group("g").group_epoch == 1
    g = _describe(c, "g")
    assert (g.group_state, g.group_epoch, g.members[0].member_epoch) == ("Stable", 1, 1)
    assert g.members[0].subscribed_topic_regex == "foo*"


def test_regex_matching_nothing_keeps_epoch_and_later_resolution_bumps_once():
    # ConsumerGroupHeartbeatRequestTest.testConsumerGroupHeartbeatWithRegularExpression: join
    # with "foo*" before "foo" exists (epoch 1), create "foo", the member ends at epoch 2.
    c = ShardContext(topic("bar", 2), config=fast())
    r = c.heartbeat("g", "m1", 0, regex="foo*")
    mark = len(c.log)
    c.advance(0)  # the resolution runs: it matches nothing
    assert [type(rec.key) for rec in _records_since(c, mark)] == [ConsumerGroupRegularExpressionKey]
    g = _describe(c, "g")
    assert (g.group_state, g.group_epoch, g.members[0].member_epoch) == ("Stable", 1, 1)

    c.update_image(topic("bar", 2), topic("foo", 3))
    mark = len(c.log)
    c.advance(11_000)  # past Kafka's 10 s minimum between two resolutions of a group
    assert [rec.value.epoch for rec in _group_epoch_records(c, mark)] == [2]
    r = c.heartbeat("g", "m1", r.member_epoch)
    assert r.member_epoch == 2 and c.assigned(r) == {"foo": {0, 1, 2}}
    assert len(_group_epoch_records(c)) == 1  # exactly one bump in the group's life so far


def test_regex_join_then_resolution_bumps_the_epoch_exactly_once():
    # The topic exists at join: the member record alone at join, then the resolution
    # writes the regex record and one ConsumerGroupMetadata(epoch 2).
    c = ShardContext(topic("foo-1", 2), config=fast())
    r = c.heartbeat("g", "m1", 0, regex="foo-.*")
    assert r.member_epoch == 1 and not _group_epoch_records(c)
    mark = len(c.log)
    c.advance(0)
    assert [type(rec.key) for rec in _records_since(c, mark)][:2] == [
        ConsumerGroupRegularExpressionKey, ConsumerGroupMetadataKey]
    assert [rec.value.epoch for rec in _group_epoch_records(c)] == [2]
    r = c.heartbeat("g", "m1", r.member_epoch)
    assert r.member_epoch == 2 and c.assigned(r) == {"foo-1": {0, 1}}
    r = c.heartbeat("g", "m1", r.member_epoch)  # steady: no further bump
    assert c.group("g").group_epoch == 2 and len(_group_epoch_records(c)) == 1
    assert c.group("g").state is ConsumerGroupState.STABLE


# ------------------------------------------------------------------ describe
def test_describe_reports_empty_regex_for_a_member_subscribed_by_names():
    # Kafka's ConsumerGroupMember defaults SubscribedTopicRegex to "" and
    # asConsumerGroupDescribeMember copies it: never null for a consumer-protocol member.
    c = ShardContext(topic("foo", 2), config=fast())
    ok(c.heartbeat("g", "by-name", 0, topics=["foo"]))
    ok(c.heartbeat("g", "by-regex", 0, regex="fo.*"))
    members = {m.member_id: m for m in _describe(c, "g").members}
    assert members["by-name"].subscribed_topic_regex == ""
    assert members["by-regex"].subscribed_topic_regex == "fo.*"
    # The same after a reload from the log (the member record carries "").
    c.shard = c.reload()
    assert {m.member_id: m.subscribed_topic_regex for m in _describe(c, "g").members} == \
        {"by-name": "", "by-regex": "fo.*"}


# --------------------------------------------------------- state topic excluded
def test_regex_resolution_never_matches_the_state_topic():
    state = topic("__kcoord_offsets", 50)  # CoordinatorConfig's default state_topic
    c = ShardContext(state, topic("foo", 2), topic("__consumer_offsets", 1), config=fast())
    r = c.heartbeat("g", "m1", 0, regex=".*")
    c.advance(0)
    assert c.group("g").resolved_regexes[".*"].topics == {"foo", "__consumer_offsets"}
    r = c.heartbeat("g", "m1", r.member_epoch)
    assert "__kcoord_offsets" not in c.assigned(r)
    assert c.assigned(r)["foo"] == {0, 1}


def test_regex_resolution_never_matches_a_configured_state_topic():
    c = ShardContext(topic("my-state", 3), topic("foo", 2), config=fast(state_topic="my-state"))
    c.heartbeat("g", "m1", 0, regex=".*")
    c.advance(0)
    assert c.group("g").resolved_regexes[".*"].topics == {"foo"}


def test_resolver_excludes_what_it_is_told_and_the_default_state_topic():
    names = ["foo", "__kcoord_offsets", "my-state"]
    assert regexes.resolve(".*", names) == {"foo", "my-state"}
    cfg = fast(state_topic="my-state")
    assert regexes.resolve(".*", names, regexes.excluded_topics(cfg)) == {"foo", "__kcoord_offsets"}
    assert regexes.excluded_topics(fast()) == {"__kcoord_offsets"}


def test_resolution_changed_treats_unresolved_as_empty():
    assert not regexes.resolution_changed(None, frozenset())
    assert regexes.resolution_changed(None, frozenset({"foo"}))


# ------------------------------------------------------- trailing bytes on load
def test_a_log_with_trailing_bytes_loads_like_the_clean_one():
    c = ShardContext(topic("foo", 4), config=fast())
    ok(c.heartbeat("g", "m1", 0, topics=["foo"]))
    ok(c.heartbeat("g", "m2", 0, topics=["foo"]))
    clean = c.reload()
    TRAILING_BYTES.reset()
    padded = [(o, k + b"\x00", None if v is None else v + b"\x01\x02") for o, k, v in c.log]
    loaded = c.reload(padded)
    assert TRAILING_BYTES.records == 2 * len(c.log) - sum(v is None for _, _, v in c.log)
    for gid in ("g",):
        a, b = clean.groups[gid], loaded.groups[gid]
        assert (a.group_epoch, a.assignment_epoch, a.members, a.target_assignment) == \
            (b.group_epoch, b.assignment_epoch, b.members, b.target_assignment)
    TRAILING_BYTES.reset()
