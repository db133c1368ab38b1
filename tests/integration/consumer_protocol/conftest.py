"""The consumer-protocol scenarios run next to every upstream (support.upstreams): Tansu and
Kafka 4.3 one node, and, as the whole directory is in the ``kafka_subset`` (SUBSET_DIRS), Kafka
4.3 on three nodes, Kafka 3.9 (no KIP-848 of its own: kcoord's reason to exist) and, where
Docker exists, the testcontainers Kafka (the ``kafka_docker`` fixture)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.kcoord import KcoordProcess
from support.names import unique_name


@pytest.fixture(scope="module")
def upstream(request: pytest.FixtureRequest):
    """Module-scoped, so a module's shared gateway serves it per upstream (pytest groups the
    tests by upstream); a per-test gateway is unaffected."""
    from support.upstreams import FIXTURES

    return request.getfixturevalue(FIXTURES[getattr(request, "param", "tansu")])


@pytest.fixture(scope="module")
def shared_kcoord(upstream, request) -> Iterator[KcoordProcess]:
    """One `kcoord serve` per module and upstream (a kcoord start costs ~5 s; each test uses
    its own topics and groups)."""
    gateway = KcoordProcess(upstream=upstream.bootstrap,
                            state_topic=unique_name(f"__kcoord_{request.module.__name__}")).start()
    yield gateway
    if gateway.running():
        gateway.stop()


@pytest.fixture
def module_kcoord(shared_kcoord: KcoordProcess) -> KcoordProcess:
    """The module's kcoord, started again first if an earlier test left it dead."""
    if not shared_kcoord.running():
        shared_kcoord.restart()
    return shared_kcoord
