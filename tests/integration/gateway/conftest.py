"""Fixtures for the gateway tests: a real Tansu and a real Gateway (see gateway_helpers)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway_helpers import (
    STATE_PARTITIONS, STATE_TOPIC, HeartbeatService, LoopThread, RunningGateway, free_ports, start_gateway,
)
from coordinator.config import CoordinatorConfig
from support.tansu import TansuBroker, start_tansu

# The shared gateways log every bad frame: their tests check one line per case, many
# cases a second (the rate limit itself is tested on a gateway of its own).
LOG_EVERY_LINE = 1_000_000


@pytest.fixture(scope="session")
def gw_tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    broker = start_tansu(free_ports(1), log_dir=tmp_path_factory.mktemp("gw-tansu"))
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def gw_loop() -> Iterator[LoopThread]:
    loop = LoopThread()
    yield loop
    loop.stop()


@pytest.fixture(scope="session")
def gateway(gw_loop: LoopThread, gw_tansu: TansuBroker) -> Iterator[RunningGateway]:
    """A gateway in front of the session Tansu, with the state topic created through it."""
    running = start_gateway(gw_loop, gw_tansu.bootstrap, config=CoordinatorConfig(
        state_topic=STATE_TOPIC, bad_request_log_rate_per_second=LOG_EVERY_LINE))
    cluster = running.gateway.cluster
    gw_loop.run(cluster.ensure_topic(STATE_TOPIC, STATE_PARTITIONS, {"cleanup.policy": "compact"}))
    gw_loop.run(cluster.wait_for_leaders(STATE_TOPIC, timeout=30))
    yield running
    running.close()


@pytest.fixture(scope="session")
def serving(gw_loop: LoopThread, gw_tansu: TansuBroker) -> Iterator[RunningGateway]:
    """A gateway whose GroupService serves Heartbeat (see HeartbeatService)."""
    running = start_gateway(gw_loop, gw_tansu.bootstrap, HeartbeatService(), config=CoordinatorConfig(
        state_topic=STATE_TOPIC, bad_request_log_rate_per_second=LOG_EVERY_LINE))
    yield running
    running.close()
