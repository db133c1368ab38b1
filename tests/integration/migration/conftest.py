"""A kcoord gateway tuned for rolling restarts: short consumer-protocol heartbeats (FAST)
and a 500 ms group.initial.rebalance.delay.ms, so the five classic members that start
together form their first generation quickly (Kafka's 3000 ms default only delays it)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.kcoord import FAST, KcoordProcess
from support.names import unique_name

GATEWAY_CONFIG = FAST + ("group_initial_rebalance_delay_ms=500",)


@pytest.fixture(scope="module")
def upstream(request: pytest.FixtureRequest):
    """Module-scoped, so a module's shared gateway serves it per upstream (pytest groups the
    tests by upstream); a per-test gateway is unaffected."""
    from support.upstreams import FIXTURES

    return request.getfixturevalue(FIXTURES[getattr(request, "param", "tansu")])


@pytest.fixture
def gateway(upstream, names) -> Iterator[KcoordProcess]:
    process = KcoordProcess(upstream=upstream.bootstrap, state_topic=f"__kcoord_{names.topic()}",
                            config=GATEWAY_CONFIG).start()
    yield process
    if process.process is not None and process.process.poll() is None:
        process.stop()


@pytest.fixture(scope="module")
def shared_gateway(upstream, request) -> Iterator[KcoordProcess]:
    """The same gateway, one per module and upstream (a kcoord start costs ~5 s; each
    rehearsal uses its own topic and group)."""
    process = KcoordProcess(upstream=upstream.bootstrap, config=GATEWAY_CONFIG,
                            state_topic=unique_name(f"__kcoord_{request.module.__name__}")).start()
    yield process
    if process.running():
        process.stop()
