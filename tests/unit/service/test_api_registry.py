"""The served-API registry (coordinator/service.py `ServedApi`, `register_api`): one table
says what ApiVersions advertises, what is answered, how, and under which metric name; an
API registered from outside is routed like the built-in ones."""
from __future__ import annotations

import asyncio

import pytest

from coordinator.config import CoordinatorConfig
from coordinator.protocol import apis
from coordinator.service import API_VERSIONS, SERVED_APIS, GroupCoordinatorService, ServedApi

from ..runtime.fakes import FakeStateTopic
from ..runtime.test_shard_failures import CLIENT

PRIVATE_KEY = 10_000        # no Kafka API has this key


def service() -> GroupCoordinatorService:
    return GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=2), FakeStateTopic(2))  # type: ignore[arg-type]


def test_the_table_advertises_kafka_43_versions_with_txn_offset_commit_and_add_offsets_to_txn():
    svc = service()
    assert svc.api_versions == API_VERSIONS
    assert svc.api_versions[apis.CONSUMER_GROUP_HEARTBEAT] == (0, 1)
    # Issue 16: served end to end (docs/transactions.md); AddOffsetsToTxn (25) answered here.
    assert svc.api_versions[apis.TXN_OFFSET_COMMIT] == (0, 5)
    assert svc.api_versions[25] == (0, 4)
    assert svc.answered_versions[apis.TXN_OFFSET_COMMIT] == (0, 5)
    assert set(svc.apis) == {a.api_key for a in SERVED_APIS}


def test_a_registered_api_is_advertised_routed_and_named():
    async def main():
        svc = service()
        seen = []

        async def private(s, ctx, request):
            seen.append((s, ctx.api_version, request))
            return "answer"

        svc.register_api(ServedApi(PRIVATE_KEY, "KcoordPrivate", (0, 2), private))
        assert svc.api_versions[PRIVATE_KEY] == (0, 2)
        assert await svc.handle(PRIVATE_KEY, 1, "request", CLIENT) == "answer"
        assert seen == [(svc, 1, "request")]
    asyncio.run(main())


def test_an_api_registered_twice_is_refused():
    svc = service()
    with pytest.raises(ValueError, match="registered twice"):
        svc.register_api(ServedApi(apis.HEARTBEAT, "Heartbeat", (0, 4), "_classic_heartbeat"))
