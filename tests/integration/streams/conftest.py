"""What the streams-group modules share for the whole session (support.streams_deployment).

- ``streams_kafka44``: one Kafka 4.4 broker with the streams floors lowered (ORACLE_BROKER). It
  is the oracle (route kafka44-direct: the instances talk to Kafka's own streams coordinator)
  and kcoord's upstream on the kafka44 route, for every module: each deployment has its own
  topics and application id, so one broker serves them all (a broker start is 5-15 s here).
- ``streams_gateways``: one `kcoord serve` per upstream, started on first use and shared by
  the modules; each group is its own application id.

Rules: everything started here is stopped at the session's end; a gateway that died under a
module fails that module's teardown (support.streams_deployment.deploy).
"""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from support.streams_deployment import ORACLE_BROKER, Gateways


@pytest.fixture(scope="session")
def streams_kafka44(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from support.kafka_broker import KAFKA_44, start_kafka

    if shutil.which("java") is None:
        pytest.skip("java not on PATH: a JDK >= 17 runs the Apache Kafka broker")
    broker = start_kafka(KAFKA_44, tmp_path_factory.mktemp("streams-kafka44"), overrides=ORACLE_BROKER)
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def streams_gateways() -> Iterator[Gateways]:
    gateways = Gateways()
    yield gateways
    gateways.stop_all()
