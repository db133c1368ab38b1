"""Fixtures of the offsets-tools integration tests: a real Tansu broker (`kcoord serve` as an
operator runs it: ops_serve.py), ports from the worker's own KCOORD_TEST_PORTS range, so two
xdist workers never race for a port."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from support import fixtures, ports
from support.tansu import TansuBroker, start_tansu


@pytest.fixture(scope="module")
def ops_tansu(tmp_path_factory) -> Iterator[TansuBroker]:
    broker = start_tansu(ports.free_block(ports.pool(), 1), log_dir=tmp_path_factory.mktemp("ops-tansu"))
    yield broker
    broker.stop()


upstream = fixtures.module_upstream(
    tansu="ops_tansu",
    doc="""The cluster the tools read and write: this suite's own Tansu or a session Kafka
    (support.upstreams parametrizes it).""")
