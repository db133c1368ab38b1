"""A new group type plugs in through the registries alone (docs/design/architecture.md, "A new
group type"): its replay rule, its `GroupType`, its downgrade-check rule. The shared APIs
(ListGroups, DeleteGroups, OffsetCommit, OffsetFetch) then serve it without a change."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group import group_types
from coordinator.group.builtin import registry_with
from coordinator.group.errors import ApiError
from coordinator.group.group_types import ACCEPT_ALL, Contribution
from coordinator.group.kio_util import schema
from ops import downgrade

from .context import ShardContext, topic
from .test_offsets_and_admin import commit

FOO = topic("foo", 4)


@dataclass
class ToyGroup:
    """A group type kcoord does not have: its only state is a member set and a `sealed` flag."""
    group_id: str
    members: dict = field(default_factory=dict)
    sealed: bool = False

    def is_empty(self) -> bool:
        return not self.members


@dataclass(frozen=True)
class ToyKey:
    group: str


class ToyGroupType:
    name = "toy"

    def state(self, group):
        return "Sealed" if group.sealed else "Open"

    def protocol_type(self, group):
        return "toy"

    def subscribed_topics(self, group):
        return set()

    def tombstones(self, group):
        return []

    def delete_error(self, group):
        return ErrorCode.non_empty_group if group.members else None

    def offset_expiration_base(self, group):
        return None

    def metadata_expires(self, group):
        return False

    def validate_offset_fetch(self, group, member_id, member_epoch):
        if member_id is not None and member_id not in group.members:
            raise ApiError(ErrorCode.unknown_member_id)

    def offset_delete_error(self, group):
        return None

    def validate_offset_commit(self, group, image, member_id, instance_id, generation, api_version,
                               transactional=False):
        if group.sealed:
            raise ApiError(ErrorCode.rebalance_in_progress, "sealed")
        return ACCEPT_ALL

    def offset_commit_timers(self, group, member_id, now_ms):
        return []


def _replay_toy(replayer, key, value, offset, producer_id):
    group = replayer.group_as(key.group, ToyGroup, create=True)
    group.members = dict.fromkeys(value.members)
    group.sealed = value.sealed


TOY = Contribution(name="toy", group_class=ToyGroup, group_type=ToyGroupType(), replay_rules={ToyKey: _replay_toy})


@pytest.fixture
def toy_registered():
    """The built-in registry plus the toy's contribution (the only path a type plugs in by)."""
    try:
        yield registry_with(TOY)
    finally:
        group_types.unregister(ToyGroup)


def _toy_record(group: str, members: tuple[str, ...], sealed: bool = False):
    return SimpleNamespace(key=ToyKey(group), value=SimpleNamespace(members=members, sealed=sealed))


def test_a_registered_type_is_listed_deleted_and_committed_to_through_its_rules(toy_registered):
    c = ShardContext(FOO, registry=toy_registered)
    c.shard.replay(_toy_record("t1", ("a",)))
    c.shard.replay(_toy_record("t2", ()))
    c.shard.replay(_toy_record("t3", (), sealed=True))
    assert isinstance(c.group("t1"), ToyGroup)

    lmod = schema("list_groups", 5, "request")
    resp = c.call("list_groups", lmod.ListGroupsRequest(states_filter=(), types_filter=("toy",)), 5)
    assert {g.group_id: (g.group_type, g.group_state, g.protocol_type) for g in resp.groups} == {
        "t1": ("toy", "Open", "toy"), "t2": ("toy", "Open", "toy"), "t3": ("toy", "Sealed", "toy")}

    assert commit(c, "t2", "", -1, {"foo": {0: 5}}).topics[0].partitions[0].error_code == ErrorCode.none
    assert commit(c, "t3", "", -1, {"foo": {0: 5}}).topics[0].partitions[0].error_code == \
        ErrorCode.rebalance_in_progress

    delmod = schema("delete_groups", 2, "request")
    resp = c.call("delete_groups", delmod.DeleteGroupsRequest(groups_names=("t1", "t2")), 2)
    assert {r.group_id: r.error_code for r in resp.results} == {"t1": ErrorCode.non_empty_group,
                                                               "t2": ErrorCode.none}


def test_a_record_of_another_type_replaces_the_group_only_when_it_creates(toy_registered):
    c = ShardContext(FOO, registry=toy_registered)
    c.heartbeat("g", "m1", 0, topics=["foo"])
    c.shard.replay(_toy_record("g", ("x",)))     # compacted conversion: the later record wins
    assert isinstance(c.group("g"), ToyGroup)
    commit(c, "simple", "", -1, {"foo": {0: 1}})  # a simple classic group is always replaced
    c.shard.replay(_toy_record("simple", ()))
    assert isinstance(c.group("simple"), ToyGroup)


def test_a_replay_rule_is_contributed_once(toy_registered):
    again = Contribution(name="toy again", replay_rules={ToyKey: _replay_toy})
    with pytest.raises(ValueError, match="record key 'ToyKey' is contributed twice"):
        registry_with(TOY, again)


def test_downgrade_check_without_a_rule_reports_the_group_lost(toy_registered):
    rule = downgrade._rule(ToyGroup("t"))
    loses, reasons = rule.reasons(ToyGroup("t"), None)
    assert loses and "toy group" in reasons[0]
    assert not rule.classic_readable
