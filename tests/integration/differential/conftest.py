"""Fixtures of the differential tests: Kafka 4.4 (the session's ``kafka44``) and one kcoord,
in Kafka-equivalent mode (support.differential.KAFKA_EQUIVALENT), in front of it for the
whole directory; ``sides`` gives both as support.differential.Coordinator, Kafka first.
``kcoord_tansu`` is the same kcoord in front of the session's Tansu, for a module.

One kcoord for the session keeps the directory inside its time budget; every test uses its
own groups and topics (``names``), so tests never see each other's state.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from support.differential import KAFKA_EQUIVALENT, Coordinator, create_known_topic
from support.kcoord import KcoordProcess, serving


def kafka_equivalent_kcoord(upstream: str, state_topic_prefix: str) -> Iterator[KcoordProcess]:
    """The body of a fixture: `kcoord serve` in Kafka-equivalent mode in front of ``upstream``,
    on a state topic of its own, stopped at teardown unless it has already exited."""
    yield from serving(KcoordProcess(upstream=upstream, state_topic=f"{state_topic_prefix}_{uuid.uuid4().hex[:8]}",
                                     config=KAFKA_EQUIVALENT))


@pytest.fixture(scope="session")
def kcoord44(kafka44) -> Iterator[KcoordProcess]:
    """`kcoord serve` in Kafka-equivalent mode in front of the session's Kafka 4.4."""
    yield from kafka_equivalent_kcoord(kafka44.bootstrap, "__kcoord_diff")


@pytest.fixture(scope="module")
def kcoord_tansu(tansu) -> Iterator[KcoordProcess]:
    """kcoord in Kafka-equivalent mode in front of the session's Tansu, for the module that
    asks for it (Tansu has no group coordinator of its own to compare with)."""
    yield from kafka_equivalent_kcoord(tansu.bootstrap, "__kcoord_streams")


@pytest.fixture
def sides(kafka44, kcoord44) -> tuple[Coordinator, Coordinator]:
    """(Kafka 4.4 itself, kcoord in front of it)."""
    return Coordinator("kafka", kafka44.bootstrap), Coordinator("kcoord", kcoord44.bootstrap)


@pytest.fixture
def topic(sides, names) -> str:
    """A 6-partition topic, created on Kafka (both sides see it, with the same topic id), once
    Kafka's coordinator knows it too."""
    return create_known_topic(sides, names.topic(), 6)
