"""The consumer-protocol scenarios run next to Tansu and, where Docker exists, next to a
real Apache Kafka 4.x (testcontainers); without Docker that variant skips cleanly."""
from __future__ import annotations

import pytest

from support.apache_kafka import docker_available


@pytest.fixture(scope="session")
def apache_kafka():
    if not docker_available():
        pytest.skip("no Docker engine: the Apache Kafka (testcontainers) variant runs where Docker exists")
    from support.apache_kafka import start_apache_kafka

    broker = start_apache_kafka()
    yield broker
    broker.stop()


@pytest.fixture(params=["tansu", "apache-kafka"])
def upstream(request):
    if request.param == "apache-kafka":
        return request.getfixturevalue("apache_kafka")
    return request.getfixturevalue("tansu")
