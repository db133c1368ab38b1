"""The transaction suites' gateways: ``kcoord``, one per test, and ``module_kcoord``, one per
module and upstream. Expectations that hold on one upstream only (Tansu's read_committed and
transaction-timeout gaps) are marked in the tests themselves."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def upstream(request: pytest.FixtureRequest):
    """Module-scoped, so ``module_kcoord`` serves a module per upstream (pytest groups the
    tests by upstream); a per-test ``kcoord`` is unaffected."""
    from support.upstreams import FIXTURES

    return request.getfixturevalue(FIXTURES[getattr(request, "param", "tansu")])


@pytest.fixture
def kcoord(upstream, names):
    """`kcoord serve` in front of ``upstream`` with its defaults: transactional offsets served
    by the one process (the raw marker-aware loader; docs/design/transactions.md)."""
    from support.kcoord import FAST, KcoordProcess

    gateway = KcoordProcess(upstream=upstream.bootstrap, state_topic=f"__kcoord_{names.topic()}",
                            config=FAST).start()
    yield gateway
    if gateway.process is not None and gateway.process.poll() is None:
        gateway.stop()


@pytest.fixture(scope="module")
def shared_kcoord(upstream, request):
    """One `kcoord serve` (as ``kcoord``) per module and upstream (a kcoord start costs ~5 s;
    each test uses its own topics, groups and transactional ids)."""
    from support.kcoord import FAST, KcoordProcess
    from support.names import unique_name

    gateway = KcoordProcess(upstream=upstream.bootstrap, state_topic=unique_name(f"__kcoord_{request.module.__name__}"),
                            config=FAST).start()
    yield gateway
    if gateway.running():
        gateway.stop()


@pytest.fixture
def module_kcoord(shared_kcoord):
    """The module's kcoord, started again first if an earlier test left it dead (a test that
    kills it restarts it itself)."""
    if not shared_kcoord.running():
        shared_kcoord.restart()
    return shared_kcoord
