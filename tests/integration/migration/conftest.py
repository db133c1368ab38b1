"""A kcoord gateway tuned for rolling restarts: short consumer-protocol heartbeats (FAST)
and a 500 ms group.initial.rebalance.delay.ms, so the five classic members that start
together form their first generation quickly (Kafka's 3000 ms default only delays it)."""
from __future__ import annotations

from support import fixtures
from support.kcoord import FAST

GATEWAY_CONFIG = FAST + ("group_initial_rebalance_delay_ms=500",)

upstream = fixtures.module_upstream(
    doc="""Module-scoped, so a module's shared gateway serves it per upstream (pytest groups the
    tests by upstream); a per-test gateway is unaffected.""")
gateway = fixtures.per_test_kcoord(GATEWAY_CONFIG, name="gateway")
shared_gateway = fixtures.module_kcoord(
    GATEWAY_CONFIG, name="shared_gateway",
    doc="""The same gateway, one per module and upstream (a kcoord start costs ~5 s; each
    rehearsal uses its own topic and group).""")
