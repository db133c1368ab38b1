"""The API table (coordinator/protocol/api_table.py): frozen rows, built once from explicit
lists, and each core row's error response a valid answer at every version."""
from __future__ import annotations

import random

import pytest
from kio.schema.errors import ErrorCode

from coordinator.protocol import apis
from coordinator.protocol.api_table import CORE_APIS, CORE_TABLE, READ, ApiSpec, Groups, build_table
from coordinator.protocol.apis import kio_version_range, request_class
from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.error_responses import heartbeat
from fuzz.samples import sample


class _Error:
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        self.code, self.message = code, message


TOY = ApiSpec(apis.STREAMS_GROUP_HEARTBEAT, "StreamsGroupHeartbeat", (0, 0), heartbeat, group_operation=READ)


def test_a_table_keeps_the_order_given_and_refuses_a_key_twice():
    table = build_table(CORE_APIS, (TOY,))
    assert list(table) == [s.api_key for s in CORE_APIS] + [TOY.api_key]
    assert table[TOY.api_key] is TOY
    with pytest.raises(ValueError, match="StreamsGroupHeartbeat .88. is in the API table twice"):
        build_table(CORE_APIS, (TOY,), (TOY,))


def test_a_table_is_never_changed_in_place():
    table = build_table(CORE_APIS)
    fewer = table.without(apis.ADD_OFFSETS_TO_TXN)
    quiet = fewer.replaced(apis.TXN_OFFSET_COMMIT, advertised=False)
    assert apis.ADD_OFFSETS_TO_TXN in table and apis.ADD_OFFSETS_TO_TXN not in fewer
    assert table.advertised() == fewer.advertised() | {apis.ADD_OFFSETS_TO_TXN: (0, 4)}
    assert apis.TXN_OFFSET_COMMIT in fewer.advertised() and apis.TXN_OFFSET_COMMIT not in quiet.advertised()
    assert quiet.answered()[apis.TXN_OFFSET_COMMIT] == (0, 6)
    with pytest.raises(TypeError):
        table[apis.HEARTBEAT] = TOY      # type: ignore[index]


def test_the_core_rows_are_kafka_44s_group_apis_at_kafka_44s_versions():
    assert CORE_TABLE.advertised() == {
        apis.OFFSET_COMMIT: (2, 10), apis.OFFSET_FETCH: (1, 10), apis.JOIN_GROUP: (0, 9), apis.HEARTBEAT: (0, 4),
        apis.LEAVE_GROUP: (0, 5), apis.SYNC_GROUP: (0, 5), apis.DESCRIBE_GROUPS: (0, 6), apis.LIST_GROUPS: (0, 5),
        apis.TXN_OFFSET_COMMIT: (0, 6), apis.ADD_OFFSETS_TO_TXN: (0, 4), apis.DELETE_GROUPS: (0, 3),
        apis.OFFSET_DELETE: (0, 0), apis.CONSUMER_GROUP_HEARTBEAT: (0, 1), apis.CONSUMER_GROUP_DESCRIBE: (0, 1)}
    for spec in CORE_APIS:
        low, high = spec.versions
        known = kio_version_range(spec.api_key)
        assert known is not None and known[0] <= low <= high <= known[1], spec.name


def test_owned_rows_are_never_forwarded_and_add_offsets_to_txn_may_be():
    assert {s.api_key for s in CORE_APIS if s.owned} <= apis.GROUP_APIS
    assert apis.ADD_OFFSETS_TO_TXN not in apis.GROUP_APIS and not CORE_TABLE[apis.ADD_OFFSETS_TO_TXN].owned


@pytest.mark.parametrize("spec", CORE_APIS, ids=lambda s: s.name)
def test_each_core_error_response_is_a_valid_answer_at_every_version(spec: ApiSpec):
    rng = random.Random(spec.api_key)
    low, high = spec.versions
    seen: set = set()
    for version in [v for v in range(low, high + 1) for _ in range(3)]:
        request = sample(request_class(spec.api_key, version), rng)
        response = spec.error_response(version, _Error(ErrorCode.not_coordinator, "moved"), request)
        body = encode_body(response)
        assert decode_body(type(response), body, 0) == response
        codes = _codes(response)
        assert codes <= {ErrorCode.not_coordinator}, (spec.name, version, response)   # empty: no entry asked
        seen |= codes
    assert seen == {ErrorCode.not_coordinator}


def _codes(value) -> set:
    """Every error code in a response, nested entries included."""
    found = set()
    code = getattr(value, "error_code", None)
    if code is not None:
        found.add(code)
    for name in getattr(value, "__dataclass_fields__", ()):
        child = getattr(value, name)
        for item in child if isinstance(child, tuple) else (child,):
            if hasattr(item, "__dataclass_fields__"):
                found |= _codes(item)
    return found


def test_the_groups_a_request_names_follow_its_row():
    rng = random.Random(7)
    fetch = CORE_TABLE[apis.OFFSET_FETCH]
    old, new = sample(request_class(apis.OFFSET_FETCH, 7), rng), sample(request_class(apis.OFFSET_FETCH, 9), rng)
    assert fetch.group_ids_of(7, old) == [old.group_id] and not fetch.names_many(7)
    assert fetch.group_ids_of(9, new) == [g.group_id for g in new.groups] and fetch.names_many(9)
    delete = sample(request_class(apis.DELETE_GROUPS, 2), rng)
    assert CORE_TABLE[apis.DELETE_GROUPS].group_ids_of(2, delete) == list(delete.groups_names)
    assert CORE_TABLE[apis.LIST_GROUPS].groups is Groups.LISTED
    assert CORE_TABLE[apis.LIST_GROUPS].group_ids_of(5, sample(request_class(apis.LIST_GROUPS, 5), rng)) == []
