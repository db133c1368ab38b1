"""The connection decodes OffsetCommit v8-v10 with the fast decoder (commit_decode.py) only
when the service starts OffsetCommit itself (its starters: no authorizer); otherwise, and for
other versions or shapes, the general path hands the service kio's request."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from coordinator.config import CoordinatorConfig
from coordinator.gateway import Gateway, commit_decode
from coordinator.gateway.routes import build_routes
from coordinator.protocol import apis
from coordinator.protocol.api_versions import Features, api_versions_body
from coordinator.protocol.apis import response_class
from support.raw_client import encode_request, request

from .test_connection_flow import connect, until


class CommitService:
    api_versions = {apis.OFFSET_COMMIT: (2, 10)}

    def __init__(self, started: bool) -> None:
        self.seen: list[Any] = []
        self.starters = {apis.OFFSET_COMMIT: self.start} if started else {}

    def partition_for(self, group_id: str) -> int:
        return 0

    def _answer(self, api_version: int, req: Any) -> Any:
        self.seen.append(req)
        return response_class(apis.OFFSET_COMMIT, api_version)(throttle_time=timedelta(0), topics=())

    async def handle(self, api_key: int, api_version: int, req: Any, client: Any) -> Any:
        return self._answer(api_version, req)

    def start(self, api_version: int, req: Any, client: Any) -> Any:
        return self._answer(api_version, req)


def _gateway(started: bool) -> tuple[Gateway, CommitService]:
    service = CommitService(started)
    gateway = Gateway(service, "127.0.0.1:1", "127.0.0.1:0", "state", config=CoordinatorConfig())  # type: ignore[arg-type]
    gateway.api_versions = {apis.API_VERSIONS: (0, 4), apis.OFFSET_COMMIT: (2, 10)}
    gateway.routes = build_routes(gateway.api_versions, {apis.OFFSET_COMMIT})
    gateway.api_versions_bodies = {v: api_versions_body(v, gateway.api_versions, Features()) for v in range(5)}
    return gateway, service


def _commit(version: int, correlation_id: int) -> bytes:
    mod = __import__(f"kio.schema.offset_commit.v{version}.request", fromlist=["x"])
    key = {"topic_id": None} if version >= 10 else {"name": "orders"}
    fields: dict[str, Any] = {"group_instance_id": None} if version >= 7 else {}
    if 2 <= version <= 4:
        fields["retention_time"] = timedelta(milliseconds=-1)
    return encode_request(apis.OFFSET_COMMIT, version, correlation_id, request(
        apis.OFFSET_COMMIT, version, group_id="g", generation_id_or_member_epoch=1, member_id="m", **fields,
        topics=(mod.OffsetCommitRequestTopic(**key, partitions=(mod.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata=""),)),)))


async def test_the_started_commit_is_decoded_in_one_pass_and_other_versions_by_kio() -> None:
    gateway, service = _gateway(started=True)
    connection, transport = connect(gateway)
    connection.data_received(_commit(9, 1) + _commit(7, 2) + _commit(10, 3) + _commit(8, 4))
    await until(lambda: len(transport.correlation_ids()) == 4, "four answers")
    assert [isinstance(r, commit_decode.OffsetCommitRequest) for r in service.seen] == [True, False, True, True]
    assert [r.__version__ for r in service.seen] == [9, 7, 10, 8]
    assert service.seen[0].topics[0].name == "orders" and service.seen[0].topics[0].partitions[0].committed_offset == 5


async def test_without_starters_the_service_gets_kios_request() -> None:
    gateway, service = _gateway(started=False)
    connection, transport = connect(gateway)
    connection.data_received(_commit(9, 1))
    await until(lambda: transport.correlation_ids() == [1], "the answer")
    assert not isinstance(service.seen[0], commit_decode.OffsetCommitRequest)
    assert service.seen[0].topics[0].partitions[0].committed_offset == 5


async def test_a_body_that_does_not_parse_closes_as_before() -> None:
    gateway, service = _gateway(started=True)
    connection, transport = connect(gateway)
    frame = _commit(9, 1)
    connection.data_received(frame[:-3] + b"\xff\xff\xff")   # a body cut short: a bad varint
    assert transport.closed or transport.aborted or connection.closing
    assert service.seen == [] and transport.correlation_ids() == []


