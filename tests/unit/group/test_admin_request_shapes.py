"""Every version of DescribeGroups (v0-6), ListGroups (v0-5), DeleteGroups (v0-3) and
ConsumerGroupDescribe (v0-1) is answered by the shard through one request shape per API
(coordinator/group/admin_requests.py), with Kafka's default for a field an old version lacks
and the answer in the version's own classes."""
from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.admin_requests import ConsumerGroupDescribe, DeleteGroups, DescribeGroups, ListGroups
from coordinator.group.group_admin import AUTHORIZED_OPERATIONS_OMITTED, GROUP_OPERATIONS
from coordinator.group.kio_util import schema

from .context import ShardContext, topic
from .test_consumer_heartbeat import fast
from .test_offsets_and_admin import commit

FOO = topic("foo", 4)


@pytest.fixture
def c() -> ShardContext:
    """A consumer group "g" (Stable) and a classic group "simple" (Empty, offsets only)."""
    c = ShardContext(FOO, config=fast())
    c.heartbeat("g", "m1", 0, topics=["foo"])
    commit(c, "simple", "", -1, {"foo": {0: 1}})
    return c


def _request(api: str, version: int, **fields):
    mod = schema(api, version, "request")
    cls = next(getattr(mod, n) for n in dir(mod) if n.endswith("Request"))
    return cls(**{k: v for k, v in fields.items() if k in cls.__dataclass_fields__})


@pytest.mark.parametrize("version", range(7))
def test_describe_groups_each_version(c, version):
    req = _request("describe_groups", version, groups=("simple", "g", "nope"), include_authorized_operations=True)
    resp = c.call("describe_groups", req, version)
    assert type(resp) is schema("describe_groups", version).DescribeGroupsResponse
    simple, g, nope = resp.groups
    assert (simple.group_id, simple.error_code, simple.group_state) == ("simple", ErrorCode.none, "Empty")
    # Authorized operations exist from v3 (KIP-430); before, the request cannot ask for them.
    if version >= 3:
        assert simple.authorized_operations == GROUP_OPERATIONS
    # A consumer group, like a missing one, is Dead: GROUP_ID_NOT_FOUND with a message from v6
    # (KIP-1043), no error before.
    assert g.group_state == nope.group_state == "Dead"
    if version >= 6:
        assert (g.error_code, g.error_message) == (ErrorCode.group_id_not_found, "Group g is not a classic group.")
        assert (nope.error_code, nope.error_message) == (ErrorCode.group_id_not_found, "Group nope not found.")
    else:
        assert g.error_code == nope.error_code == ErrorCode.none


def test_describe_groups_without_authorized_operations_omits_them(c):
    req = _request("describe_groups", 5, groups=("simple",), include_authorized_operations=False)
    assert c.call("describe_groups", req, 5).groups[0].authorized_operations == AUTHORIZED_OPERATIONS_OMITTED


@pytest.mark.parametrize("version", range(6))
def test_list_groups_each_version(c, version):
    req = _request("list_groups", version, states_filter=(" stable ",), types_filter=("CLASSIC",))
    resp = c.call("list_groups", req, version)
    assert type(resp) is schema("list_groups", version).ListGroupsResponse
    listed = sorted(g.group_id for g in resp.groups)
    # The states filter exists from v4, the types filter from v5 (both trimmed, any case);
    # without them every group is listed.
    assert listed == {4: ["g"], 5: []}.get(version, ["g", "simple"])


@pytest.mark.parametrize("version", range(4))
def test_delete_groups_each_version(c, version):
    resp = c.call("delete_groups", _request("delete_groups", version, groups_names=("simple", "nope")), version)
    assert type(resp) is schema("delete_groups", version).DeleteGroupsResponse
    assert [(r.group_id, r.error_code) for r in resp.results] == [
        ("simple", ErrorCode.none), ("nope", ErrorCode.group_id_not_found)]


@pytest.mark.parametrize("version", range(2))
def test_consumer_group_describe_each_version(c, version):
    req = _request("consumer_group_describe", version, group_ids=("g",), include_authorized_operations=True)
    resp = c.call("consumer_group_describe", req, version)
    assert type(resp) is schema("consumer_group_describe", version).ConsumerGroupDescribeResponse
    (g,) = resp.groups
    assert (g.error_code, g.group_state, g.authorized_operations) == (ErrorCode.none, "Stable", GROUP_OPERATIONS)


def test_the_shapes_take_kafkas_defaults_for_fields_old_versions_lack():
    d0 = DescribeGroups(_request("describe_groups", 0, groups=("a",)))
    assert (d0.groups, d0.include_authorized_operations, d0.not_found_error) == (("a",), False, False)
    assert d0.response_schema is schema("describe_groups", 0)
    d6 = DescribeGroups(_request("describe_groups", 6, groups=(), include_authorized_operations=True))
    assert (d6.include_authorized_operations, d6.not_found_error) == (True, True)
    l0 = ListGroups(_request("list_groups", 0))
    assert (l0.states_filter, l0.types_filter) == ((), ())
    l4 = ListGroups(_request("list_groups", 4, states_filter=("Empty",)))
    assert (l4.states_filter, l4.types_filter) == (("Empty",), ())
    assert DeleteGroups(_request("delete_groups", 3, groups_names=("x",))).response_schema is schema("delete_groups", 3)
    cgd = ConsumerGroupDescribe(_request("consumer_group_describe", 0, group_ids=("x",),
                                         include_authorized_operations=False))
    assert (cgd.group_ids, cgd.include_authorized_operations) == (("x",), False)
