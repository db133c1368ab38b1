"""Fixtures of the differential tests: Kafka 4.4 (the session's ``kafka44``) and one kcoord,
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
def kcoord44(kafka44) -> Iterator[KcoordProcess]:
    """`kcoord serve` in Kafka-equivalent mode in front of the session's Kafka 4.4."""
    gateway = KcoordProcess(upstream=kafka44.bootstrap, state_topic=f"__kcoord_diff_{uuid.uuid4().hex[:8]}",
                            config=KAFKA_EQUIVALENT).start()
    yield gateway
    if gateway.process is not None and gateway.process.poll() is None:
        gateway.stop()


@pytest.fixture
def sides(kafka44, kcoord44) -> tuple[Coordinator, Coordinator]:
    """(Kafka 4.4 itself, kcoord in front of it)."""
    return Coordinator("kafka", kafka44.bootstrap), Coordinator("kcoord", kcoord44.bootstrap)


@pytest.fixture
def topic(sides, names) -> str:
    """A 6-partition topic, created on Kafka (both sides see it, with the same topic id), once
    Kafka's coordinator knows it too."""
    return create_known_topic(sides, names.topic(), 6)
