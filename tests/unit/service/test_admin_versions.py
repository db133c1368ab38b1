"""The service answers DescribeGroups v0-6 and ListGroups v0-5 in each version's own classes,
through the request shapes (coordinator/group/admin_requests.py): authorized operations only
when the version can ask for them, GROUP_ID_NOT_FOUND for a missing group only from
DescribeGroups v6 (KIP-1043), the states and types filters only from ListGroups v4 and v5.
Real service and runtimes over the fake state topic (tests/unit/runtime/fakes.py)."""
from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from coordinator.group.group_admin import AUTHORIZED_OPERATIONS_OMITTED
from coordinator.group.kio_util import schema

from ..runtime.fakes import FakeStateTopic, group_in
from ..runtime.test_shard_failures import CLIENT, commit, service_for

PARTITIONS = 4
DESCRIBE_GROUPS, LIST_GROUPS = 15, 16


def _request(api: str, version: int, **fields):
    mod = schema(api, version, "request")
    cls = next(getattr(mod, n) for n in dir(mod) if n.endswith("Request"))
    return cls(**{k: v for k, v in fields.items() if k in cls.__dataclass_fields__})


def _served(api_key: int, version: int, requests: list, groups: list[str]) -> list:
    async def main():
        service = service_for(FakeStateTopic(PARTITIONS))
        await service.start()
        for g in groups:
            await commit(service, g, "t", 0, 1)
        return [await service.handle(api_key, version, req, CLIENT) for req in requests]
    return asyncio.run(main())


@pytest.mark.parametrize("version", range(7))
def test_describe_groups_each_version(version):
    known, missing = group_in(1, PARTITIONS, "known"), group_in(2, PARTITIONS, "missing")
    req = _request("describe_groups", version, groups=(known, missing), include_authorized_operations=False)
    (resp,) = _served(DESCRIBE_GROUPS, version, [req], [known])
    assert type(resp) is schema("describe_groups", version).DescribeGroupsResponse
    found, dead = resp.groups
    assert (found.group_id, found.error_code, found.group_state) == (known, ErrorCode.none, "Empty")
    if version >= 3:
        assert found.authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    assert (dead.group_id, dead.group_state) == (missing, "Dead")
    if version >= 6:
        assert (dead.error_code, dead.error_message) == (ErrorCode.group_id_not_found, f"Group {missing} not found.")
    else:
        assert dead.error_code == ErrorCode.none


@pytest.mark.parametrize("version", range(6))
def test_list_groups_each_version(version):
    groups = sorted(group_in(p, PARTITIONS, "listed") for p in range(PARTITIONS))
    # The offsets-only groups are Empty classic groups, on every shard.
    by_state = _request("list_groups", version, states_filter=("Stable",), types_filter=())
    by_type = _request("list_groups", version, states_filter=(), types_filter=("consumer",))
    answers = _served(LIST_GROUPS, version, [by_state, by_type], groups)
    assert all(type(a) is schema("list_groups", version).ListGroupsResponse for a in answers)
    listed = [sorted(g.group_id for g in a.groups) for a in answers]
    assert listed == [[] if version >= 4 else groups, [] if version >= 5 else groups]
