"""Zone-aware standbys, kcoord's extension (off by default:
`streams_rack_aware_assignment_tags`), with a real Kafka Streams 4.4 application through kcoord
in front of Kafka 4.4.

Four instances of the counting application (support.streams_deployment: 1_0..1_5 stateful, one
standby replica) in two zones, `client.tag.zone` a, b, a, b: Kafka Streams 4.4 sends the tag
as its join's ClientTags, and kcoord, told `zone`, places each stateful task's standby in the
other zone than its active (KIP-708's rule, docs/user/streams-groups.md). Kafka 4.4's own
`sticky` assignor ignores tags: with two of three other processes in the other zone, all six
tasks would land so by chance about one time in eleven. What must hold:
- every stateful task's active and standby are in different zones, once stable;
- again after kill -9 of one instance (three left: one zone has one process, which then holds
  one copy of every task);
- no task is active on two instances at once; the counts are right.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.kcoord import KcoordProcess
from support.streams_app import active_overlaps
from support.streams_deployment import STATEFUL, Deployment, deploy, gateway_with

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def gateway(streams_kafka44: Any) -> Iterator[KcoordProcess]:
    """kcoord with zone-aware standbys on (the tag key `zone`), in front of Kafka 4.4."""
    with gateway_with(streams_kafka44.bootstrap, "streams_rack_aware_assignment_tags=zone") as process:
        yield process


@pytest.fixture(scope="module")
def dep(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, java_classes: Path,
        gateway: KcoordProcess) -> Iterator[Deployment]:
    with deploy("kafka44", request, tmp_path_factory, gateway=gateway) as deployment:
        yield deployment


def copies_by_zone(d: dict[str, Any], dep: Deployment) -> dict[str, tuple[str, list[str]]]:
    """Each stateful task -> (its active's zone, its standbys' zones), from a describe."""
    zone = {a.app_server: a.zone for a in dep.apps}
    out: dict[str, tuple[str, list[str]]] = {}
    for task in sorted(STATEFUL):
        (active,) = [zone[m["endpoint"]] for m in d["members"] if task in m["active"]]
        out[task] = (active, sorted(zone[m["endpoint"]] for m in d["members"] if task in m["standby"]))
    return out


def check_zones(d: dict[str, Any], dep: Deployment) -> None:
    copies = copies_by_zone(d, dep)
    assert all(len(standbys) == 1 for _, standbys in copies.values()), f"one standby per stateful task: {copies}"
    same = {t: c for t, c in copies.items() if c[0] in c[1]}
    assert not same, f"standbys in their active's zone: {same} (all: {copies}); {d}"


def test_standbys_in_the_other_zone(dep: Deployment) -> None:
    dep.start(4, zones=("a", "b"))
    check_zones(dep.wait_stable(90), dep)
    dep.produce()
    dep.wait_counts()


def test_standbys_in_the_other_zone_after_a_kill(dep: Deployment) -> None:
    dep.alive[0].kill()
    check_zones(dep.wait_stable(90), dep)
    dep.produce()
    dep.wait_counts()
    assert active_overlaps(dep.apps) == []
