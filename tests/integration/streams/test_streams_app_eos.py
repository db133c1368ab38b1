"""The counting Streams application (support.streams_deployment) with
processing.guarantee=exactly_once_v2 and group.protocol=streams: kill -9 of an instance while
input is flowing, through kcoord on Kafka 4.4 and on Kafka 4.4's own coordinator (the oracle).

Each commit of an instance is one producer transaction: its outputs, its changelog and
repartition records, and its input offsets (TxnOffsetCommit through whatever serves the
group). A kill -9 leaves a transaction open; the survivor that takes the task over fences the
killed producer (its transactional.id is per process and thread in EOS v2, so the transaction
coordinator aborts it at its timeout) and resumes from the committed offsets and changelog.

What is checked: the counts read with read_committed equal the input's exactly (any record
counted twice or lost would show: the same run with at_least_once over-counted 14 of 17 words
by 1 to 14 on Kafka 4.4, as the input records the killed instance had sent on to the
repartition topic but not committed were read again), the group is stable over the survivors,
and no task was active on two instances at once.
On Tansu 0.6 only the run without a failure: a read_committed consumer there also reads
aborted records, and Tansu never aborts a timed-out transaction (docs/user/exactly-once.md), so
no exactly-once check can hold across a kill -9. Without one no transaction is aborted, and the
counts through kcoord must still be exact: every commit a transaction (transactions v1, which
Tansu serves), its TxnOffsetCommit answered by kcoord.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.streams_app import active_overlaps
from support.streams_deployment import Deployment, deploy, routes

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.timeout(240)]


def exactly_once(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deploy(request.param, request, tmp_path_factory, guarantee="exactly_once_v2") as deployment:
        yield deployment


def running(dep: Deployment) -> None:
    """Three instances, the first input counted exactly on a stable group."""
    dep.start(3)
    dep.produce()
    dep.wait_stable(90)
    dep.wait_counts()


@pytest.fixture(scope="module", params=routes("kafka44-direct", "kafka44"))
def dep(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
        java_classes: Path) -> Iterator[Deployment]:
    yield from exactly_once(request, tmp_path_factory)


def test_exactly_once_v2_counts_survive_kill9_mid_flow(dep: Deployment) -> None:
    running(dep)
    # The kill comes while input arrives, so the instances are mid-transaction when one dies.
    dep.produce(3000, chunk=50, halfway=dep.alive[0].kill)
    dep.wait_stable(dep.session_s + 40)
    dep.wait_counts(90)
    assert active_overlaps(dep.apps) == []


@pytest.fixture(scope="module", params=routes("tansu"))
def tansu_dep(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
              java_classes: Path) -> Iterator[Deployment]:
    yield from exactly_once(request, tmp_path_factory)


def test_exactly_once_v2_counts_exact_without_a_failure_on_tansu(tansu_dep: Deployment) -> None:
    running(tansu_dep)
    tansu_dep.produce(1000, chunk=50)        # more commits, each a transaction, on a stable group
    tansu_dep.wait_counts(90)
    assert active_overlaps(tansu_dep.apps) == []
