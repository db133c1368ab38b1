"""The API table is the one source of what the service serves (coordinator/protocol/api_table.py):
ApiVersions, the authorization stage, the gateway's routes and the fuzzer's targets say what
the rows say, and an extension's rows (a toy API here) make an API served, authorized and
routed without any other table."""
from __future__ import annotations

import asyncio
import dataclasses
import random

from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.connect_apis import CONNECT_ROWS
from coordinator.gateway.routes import GROUP, build_routes, route_key
from coordinator.group.errors import ApiError
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.private_apis import CLIENT_ASSIGNOR_ROWS
from coordinator.protocol import apis
from coordinator.protocol.api_table import (
    CORE_APIS,
    DESCRIBE,
    READ,
    ApiSpec,
    ApiTable,
    Groups,
    build_table,
    group_ids_field,
)
from coordinator.protocol.api_versions import advertised_versions
from coordinator.protocol.apis import request_class
from coordinator.service import GroupCoordinatorService, enabled_extensions
from coordinator.service.envelope import ENVELOPE_ROWS
from coordinator.service.streams_apis import STREAMS_ROWS
from fuzz.samples import sample
from fuzz.targets import SERVED, TARGETS

from ..runtime.fakes import FakeStateTopic
from ..runtime.test_shard_failures import CLIENT
from .test_authz import DenyGroups

PARTITIONS = 2
EVERY_ROW = build_table(CORE_APIS, CLIENT_ASSIGNOR_ROWS, CONNECT_ROWS, STREAMS_ROWS, ENVELOPE_ROWS)
# A state log without raw reads: TxnOffsetCommit answered but not advertised, AddOffsetsToTxn forwarded.
WITHOUT_TXN = EVERY_ROW.without(apis.ADD_OFFSETS_TO_TXN).replaced(apis.TXN_OFFSET_COMMIT, advertised=False)


async def started(authorizer=None, **kwargs) -> GroupCoordinatorService:
    extra = {"authorizer": authorizer} if authorizer is not None else {}
    svc = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=PARTITIONS), FakeStateTopic(PARTITIONS),  # type: ignore[arg-type]
                                  **extra, **kwargs)
    await svc.start()
    return svc


def test_apiversions_lists_what_the_rows_say():
    svc = asyncio.run(started())
    assert svc.table == WITHOUT_TXN
    assert svc.api_versions == WITHOUT_TXN.advertised() and svc.answered_versions == WITHOUT_TXN.answered()
    listed = advertised_versions({}, svc.api_versions)
    assert {k: v for k, v in listed.items() if k not in (apis.API_VERSIONS, apis.FIND_COORDINATOR)} == \
        WITHOUT_TXN.advertised()


def test_the_gateway_routes_every_row_to_the_service_with_its_error_response():
    svc = asyncio.run(started())
    routes = build_routes(svc.answered_versions, svc.table)
    served = {(r.api_key, r.api_version): r for r in routes.values() if r.kind == GROUP}
    assert set(served) == {(k, v) for k, s in svc.table.items() for v in range(s.versions[0], s.versions[1] + 1)}
    assert all(r.error_response is svc.table[r.api_key].error_response for r in served.values())


def test_every_rows_shard_operation_is_served_by_the_shard():
    operations = {s.name: s.shard_operation for s in EVERY_ROW.values() if s.shard_operation is not None}
    no_shard_operation = {"TxnOffsetCommit", "AddOffsetsToTxn", "StreamsGroupTopologyDescriptionUpdate", "Envelope"}
    assert set(operations) == {s.name for s in EVERY_ROW.values()} - no_shard_operation
    assert all(callable(getattr(GroupCoordinatorShard(0), op, None)) for op in operations.values()), operations


def test_the_fuzzer_targets_every_row_in_the_tables_order():
    local = (apis.API_VERSIONS, apis.FIND_COORDINATOR, apis.SASL_HANDSHAKE, apis.SASL_AUTHENTICATE)
    assert [t.api_key for t in TARGETS if t.handling == SERVED and t.api_key not in local] == list(EVERY_ROW)


class RefuseGroups(DenyGroups):
    """DenyGroups that allows every transactional id, so the group check is reached."""

    def authorize(self, client, actions):
        verdicts = super().authorize(client, actions)
        return [ok or a.resource_type == "TRANSACTIONAL_ID" for a, ok in zip(actions, verdicts)]


def test_the_authorization_stage_asks_each_rows_operations_and_answers_with_its_error_response():
    async def main():
        refuse = RefuseGroups(*[f"g{i}" for i in range(50)])
        svc = await started(refuse)
        rng = random.Random(3)
        checked = 0
        for spec in svc.table.values():
            if spec.groups in (Groups.LISTED, Groups.NONE):   # ListGroups; the Envelope (no group)
                continue
            version = spec.versions[1]
            request = sample(request_class(spec.api_key, version), rng)
            groups = [f"g{i}" for i in range(len(spec.group_ids_of(version, request)))]
            request = _naming(request, spec, version, groups)
            refuse.asked.clear()
            response = await svc.handle(spec.api_key, version, request, CLIENT)
            asked = [a for a in refuse.asked if a.resource_type == "GROUP"]
            assert {(a.operation, a.name) for a in asked} >= {(spec.group_operation, g) for g in groups}, spec.name
            transactional = [a.operation for a in refuse.asked if a.resource_type == "TRANSACTIONAL_ID"]
            assert transactional == ([spec.transactional_id_operation] if spec.transactional_id_operation else [])
            if not spec.names_many(version):
                assert response == spec.error_response(version, ApiError(ErrorCode.group_authorization_failed),
                                                       request), spec.name
            checked += 1
        assert checked == len(svc.table) - 2
    asyncio.run(main())


def _naming(request, spec: ApiSpec, version: int, groups: list[str]):
    """``request`` naming ``groups`` where its row says the groups are."""
    if not spec.names_many(version):
        return dataclasses.replace(request, group_id=groups[0])
    if spec.api_key == apis.OFFSET_FETCH:
        return dataclasses.replace(request, groups=tuple(dataclasses.replace(g, group_id=n)
                                                         for g, n in zip(request.groups, groups)))
    field = {apis.DESCRIBE_GROUPS: "groups", apis.DELETE_GROUPS: "groups_names"}.get(spec.api_key, "group_ids")
    return dataclasses.replace(request, **{field: tuple(groups)})


# ------------------------------------------------------------- a toy extension
def _toy_error(version: int, error, request=None):
    return ("toy error", error.code)


async def _toy_heartbeat(service, ctx, request):
    return ("toy heartbeat", request.group_id)


async def _toy_describe(service, ctx, request):
    return ("toy describe", sorted(ctx.denied_groups))


TOY_ROWS = (
    ApiSpec(apis.STREAMS_GROUP_HEARTBEAT, "StreamsGroupHeartbeat", (0, 0), _toy_error, _toy_heartbeat,
            group_operation=READ),
    ApiSpec(apis.STREAMS_GROUP_DESCRIBE, "StreamsGroupDescribe", (0, 0), _toy_error, _toy_describe,
            group_operation=DESCRIBE, groups=Groups.MANY, group_ids=group_ids_field),
)


def test_an_extensions_rows_make_a_toy_api_served_authorized_and_routed():
    async def main():
        refuse = DenyGroups("secret")
        config = CoordinatorConfig(state_topic_partitions=PARTITIONS)
        # The toy takes the streams group APIs' keys: the streams rows are left out.
        others = tuple(rows for rows in enabled_extensions(config) if rows is not STREAMS_ROWS)
        plain = await started(extensions=others)
        svc = await started(refuse, extensions=(*others, TOY_ROWS))
        toy = {s.api_key for s in TOY_ROWS}
        # Served and advertised: the rows' versions, through the gateway's ApiVersions too.
        assert not toy & set(plain.api_versions) and not toy & set(plain.table)
        assert {k: svc.api_versions[k] for k in toy} == {k: (0, 0) for k in toy}
        assert isinstance(svc.table, ApiTable)
        assert dict(svc.table) == {**plain.table, **{s.api_key: s for s in TOY_ROWS}}
        listed = advertised_versions({}, svc.api_versions)
        assert all(listed[k] == (0, 0) for k in toy) and not toy & set(advertised_versions({}, plain.api_versions))
        # Routed to the service, with the toy's error response.
        routes = build_routes(listed, svc.table)
        assert all(routes[route_key(k, 0)].kind == GROUP and routes[route_key(k, 0)].error_response is _toy_error
                   for k in toy)
        # Authorized by its rows: one group refused unrun, several answered per group.
        heartbeat = sample(request_class(apis.STREAMS_GROUP_HEARTBEAT, 0), random.Random(1))
        assert await svc.handle(apis.STREAMS_GROUP_HEARTBEAT, 0, dataclasses.replace(heartbeat, group_id="open"),
                                CLIENT) == ("toy heartbeat", "open")
        assert await svc.handle(apis.STREAMS_GROUP_HEARTBEAT, 0, dataclasses.replace(heartbeat, group_id="secret"),
                                CLIENT) == ("toy error", ErrorCode.group_authorization_failed)
        describe = request_class(apis.STREAMS_GROUP_DESCRIBE, 0)(group_ids=("open", "secret"),
                                                                include_authorized_operations=False)
        refuse.asked.clear()
        assert await svc.handle(apis.STREAMS_GROUP_DESCRIBE, 0, describe, CLIENT) == ("toy describe", ["secret"])
        assert [(a.operation, a.name) for a in refuse.asked] == [(DESCRIBE, "open"), (DESCRIBE, "secret")]
    asyncio.run(main())
