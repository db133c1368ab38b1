"""Classic-group tests share one `kcoord serve` per test module (each test uses its own
topics and groups): a gateway start costs ~2-3 s, a dozen of which would be a sixth of
this suite's time. Tests that kill or reconfigure the gateway start their own.

``upstream`` is module-scoped here so one gateway serves a module per upstream (Tansu, Kafka 4.3,
support.upstreams); pytest groups the tests by upstream.

The gateway waits 500 ms (group.initial.rebalance.delay.ms) before a new group's first
generation, as the migration suite's does: Kafka's 3000 ms default, extended once per member
that joins meanwhile, cost every test's first split up to 6 s, and no test here measures it
(each waits for the split, however many generations it takes)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.kcoord import FAST, KcoordProcess
from support.names import unique_name

GATEWAY_CONFIG = (*FAST, "group_initial_rebalance_delay_ms=500")


@pytest.fixture(scope="module")
def upstream(request: pytest.FixtureRequest):
    from support.upstreams import FIXTURES

    return request.getfixturevalue(FIXTURES[getattr(request, "param", "tansu")])


@pytest.fixture(scope="module")
def shared_kcoord(upstream, request) -> Iterator[KcoordProcess]:
    gateway = KcoordProcess(upstream=upstream.bootstrap, config=GATEWAY_CONFIG,
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
