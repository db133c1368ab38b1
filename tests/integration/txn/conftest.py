"""The transaction suites' gateways: ``kcoord``, one per test, and ``module_kcoord``, one per
module and upstream. Expectations that hold on one upstream only (Tansu's read_committed and
transaction-timeout gaps) are marked in the tests themselves."""
from __future__ import annotations

from support import fixtures

upstream = fixtures.module_upstream(
    doc="""Module-scoped, so ``module_kcoord`` serves a module per upstream (pytest groups the
    tests by upstream); a per-test ``kcoord`` is unaffected.""")
kcoord = fixtures.per_test_kcoord(
    name="kcoord",
    doc="""`kcoord serve` in front of ``upstream`` with its defaults: transactional offsets served
    by the one process (the raw marker-aware loader; docs/design/transactions.md).""")
shared_kcoord = fixtures.module_kcoord(
    doc="""One `kcoord serve` (as ``kcoord``) per module and upstream (a kcoord start costs ~5 s;
    each test uses its own topics, groups and transactional ids).""")
module_kcoord = fixtures.revived_kcoord(
    name="module_kcoord",
    doc="""The module's kcoord, started again first if an earlier test left it dead (a test that
    kills it restarts it itself).""")
