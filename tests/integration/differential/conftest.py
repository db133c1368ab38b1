"""Fixtures of the differential tests: Kafka 4.3 (the session's ``kafka43``) and one kcoord,
in Kafka-equivalent mode (support.differential.KAFKA_EQUIVALENT), in front of it for the
whole directory; ``sides`` gives both as support.differential.Coordinator, Kafka first.

One kcoord for the session keeps the directory inside its time budget; every test uses its
own groups and topics (``names``), so tests never see each other's state.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from support.differential import KAFKA_EQUIVALENT, Coordinator, create_known_topic
from support.kcoord import KcoordProcess


@pytest.fixture(scope="session")
def kcoord43(kafka43) -> Iterator[KcoordProcess]:
    """`kcoord serve` in Kafka-equivalent mode in front of the session's Kafka 4.3."""
    gateway = KcoordProcess(upstream=kafka43.bootstrap, state_topic=f"__kcoord_diff_{uuid.uuid4().hex[:8]}",
                            config=KAFKA_EQUIVALENT).start()
    yield gateway
    if gateway.process is not None and gateway.process.poll() is None:
        gateway.stop()


@pytest.fixture
def sides(kafka43, kcoord43) -> tuple[Coordinator, Coordinator]:
    """(Kafka 4.3 itself, kcoord in front of it)."""
    return Coordinator("kafka", kafka43.bootstrap), Coordinator("kcoord", kcoord43.bootstrap)


@pytest.fixture
def topic(sides, names) -> str:
    """A 6-partition topic, created on Kafka (both sides see it, with the same topic id), once
    Kafka's coordinator knows it too."""
    return create_known_topic(sides, names.topic(), 6)
