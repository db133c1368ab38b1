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

from support import fixtures
from support.kcoord import FAST

GATEWAY_CONFIG = (*FAST, "group_initial_rebalance_delay_ms=500")

upstream = fixtures.module_upstream()
shared_kcoord = fixtures.module_kcoord(GATEWAY_CONFIG)
kcoord = fixtures.revived_kcoord(
    name="kcoord", doc="The module's gateway; restarted first if an earlier test left it dead.")
