"""What the streams-group modules share for the whole session (support.streams_deployment).

- ``streams_kafka44``: one Kafka 4.4 broker with the streams floors lowered (STREAMS_FLOORS). It
  is the oracle (route kafka44-direct: the instances talk to Kafka's own streams coordinator)
  and kcoord's upstream on the kafka44 route, for every module: each deployment has its own
  topics and application id, so one broker serves them all (a broker start is 5-15 s here).
  It is the session's ``kafka44`` itself when that broker's settings (support.kafka_broker
  SETTINGS) already lower the floors; otherwise a broker of the streams modules' own.
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

from support.streams_deployment import STREAMS_FLOORS, Gateways


@pytest.fixture(scope="session")
def streams_kafka44(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from support.kafka_broker import KAFKA_44, SETTINGS, start_kafka

    if all(SETTINGS.get(key) == value for key, value in STREAMS_FLOORS.items()):
        yield request.getfixturevalue("kafka44")
        return
    if shutil.which("java") is None:
        pytest.skip("java not on PATH: a JDK >= 17 runs the Apache Kafka broker")
    broker = start_kafka(KAFKA_44, tmp_path_factory.mktemp("streams-kafka44"), overrides=STREAMS_FLOORS)
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def streams_gateways() -> Iterator[Gateways]:
    gateways = Gateways()
    yield gateways
    gateways.stop_all()
