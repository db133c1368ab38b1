"""Classic-group tests share one `kcoord serve` per test module (each test uses its own
topics and groups): a gateway start costs ~2-3 s, a dozen of which would be a sixth of
this suite's time. Tests that kill or reconfigure the gateway start their own.

``upstream`` is module-scoped here so one gateway serves a module per upstream (Tansu, Kafka 4.3,
support.upstreams); pytest groups the tests by upstream."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.kcoord import KcoordProcess
from support.names import unique_name


@pytest.fixture(scope="module")
def upstream(request: pytest.FixtureRequest):
    from support.upstreams import FIXTURES

    return request.getfixturevalue(FIXTURES[getattr(request, "param", "tansu")])


@pytest.fixture(scope="module")
def shared_kcoord(upstream, request) -> Iterator[KcoordProcess]:
    gateway = KcoordProcess(upstream=upstream.bootstrap,
                            state_topic=unique_name(f"__kcoord_{request.module.__name__}")).start()
    yield gateway
    if gateway.process is not None and gateway.process.poll() is None:
        gateway.stop()


@pytest.fixture
def kcoord(shared_kcoord: KcoordProcess) -> KcoordProcess:
    """The module's gateway; restarted first if an earlier test left it dead."""
    if shared_kcoord.process is None or shared_kcoord.process.poll() is not None:
        shared_kcoord.restart()
    return shared_kcoord
