"""The served-API registry (coordinator/service/apis.py, filled from the API table's rows;
`register_api`): what ApiVersions advertises, what is answered, how, and under which metric
name; an API registered from outside is routed like the built-in ones."""
from __future__ import annotations

import asyncio

import pytest

from coordinator.config import CoordinatorConfig
from coordinator.connect_apis import CONNECT_ROWS
from coordinator.private_apis import CLIENT_ASSIGNOR_ROWS
from coordinator.protocol import apis
from coordinator.protocol.api_table import CORE_TABLE, ApiSpec
from coordinator.protocol.error_responses import heartbeat
from coordinator.service import GroupCoordinatorService
from coordinator.service.streams_apis import STREAMS_ROWS

from ..runtime.fakes import FakeStateTopic
from ..runtime.test_shard_failures import CLIENT

PRIVATE_KEY = 10_000        # no Kafka API has this key


def service() -> GroupCoordinatorService:
    return GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=2), FakeStateTopic(2))  # type: ignore[arg-type]


def test_the_table_advertises_kafka_43_versions_and_txn_offsets_only_where_served():
    svc = service()      # a log without the raw marker-aware reader: TxnOffsetCommit not served
    # plus kcoord's private client-assignor APIs and the connect group APIs, both on by default,
    # and the streams group APIs (always on)
    private = {s.api_key: s.versions for s in (*CLIENT_ASSIGNOR_ROWS, *CONNECT_ROWS, *STREAMS_ROWS)}
    core = CORE_TABLE.advertised()
    assert svc.api_versions == {**{k: v for k, v in core.items() if k not in (apis.TXN_OFFSET_COMMIT, 25)},
                                **private}
    assert svc.api_versions[apis.CONSUMER_GROUP_HEARTBEAT] == (0, 1)
    assert 25 not in svc.answered_versions      # AddOffsetsToTxn is forwarded upstream, as before
    # Where served (the fenced log, or txn_offsets=true): advertised at Kafka 4.4's versions.
    assert core[apis.TXN_OFFSET_COMMIT] == (0, 6) and core[25] == (0, 4)
    assert svc.answered_versions[apis.TXN_OFFSET_COMMIT] == (0, 6)
    assert set(svc.apis) == set(CORE_TABLE) - {25} | set(private) | {58}    # and the Envelope (service/envelope.py)


def test_a_registered_api_is_advertised_routed_and_named():
    async def main():
        svc = service()
        seen = []

        async def private(s, ctx, request):
            seen.append((s, ctx.api_version, request))
            return "answer"

        svc.register_api(ApiSpec(PRIVATE_KEY, "KcoordPrivate", (0, 2), heartbeat, private))
        assert svc.api_versions[PRIVATE_KEY] == (0, 2) and svc.table[PRIVATE_KEY].name == "KcoordPrivate"
        assert await svc.handle(PRIVATE_KEY, 1, "request", CLIENT) == "answer"
        assert seen == [(svc, 1, "request")]
    asyncio.run(main())


def test_an_api_registered_twice_is_refused():
    svc = service()
    with pytest.raises(ValueError, match="registered twice"):
        svc.register_api(CORE_TABLE[apis.HEARTBEAT])
