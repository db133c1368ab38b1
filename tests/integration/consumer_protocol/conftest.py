"""The consumer-protocol scenarios run next to every upstream (support.upstreams): Tansu and
Kafka 4.3 one node, and, as the whole directory is in the ``kafka_subset`` (SUBSET_DIRS), Kafka
4.3 on three nodes, Kafka 3.9 (no KIP-848 of its own: kcoord's reason to exist) and, where
Docker exists, the testcontainers Kafka (the ``kafka_docker`` fixture)."""
from __future__ import annotations

from support import fixtures

upstream = fixtures.module_upstream(
    doc="""Module-scoped, so a module's shared gateway serves it per upstream (pytest groups the
    tests by upstream); a per-test gateway is unaffected.""")
shared_kcoord = fixtures.module_kcoord(
    doc="""One `kcoord serve` per module and upstream (a kcoord start costs ~5 s; each test uses
    its own topics and groups).""")
module_kcoord = fixtures.revived_kcoord(
    name="module_kcoord", doc="The module's kcoord, started again first if an earlier test left it dead.")
