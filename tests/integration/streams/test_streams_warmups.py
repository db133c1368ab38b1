"""Warm-up tasks, kcoord's extension (off by default: `streams_warmups_enabled`), with a real
Kafka Streams 4.4 application through kcoord in front of Kafka 4.4.

The counting application (support.streams_deployment: 12 tasks, 1_0..1_5 stateful) scales out
from one instance to two, with no standby replica and an acceptable recovery lag of 100, then
of 0 (`streams.acceptable.recovery.lag`, set on the group: a caught-up 4.4 warm-up reports an
offset one above its end offset, so 0 moves a task once it is fully restored). What must hold
(docs/design/streams-groups.md, "Warm-up tasks"):
- each stateful task the second instance takes over reaches it first as a warm-up: the
  describe's current WarmupTasks, or the instance's own standby tasks (Streams runs a warm-up
  as a standby; the group has no standby replica), name it while the first instance still runs
  it active, and only then is it active there;
- the first instance ran each such task until the second's warm-up existed: its active span
  (the task's own processor init and close, StreamsEvents.ActiveLife) ends after the warm-up
  was first seen;
- no task is active on two instances at once; the counts are right after the move, so the
  moved state is complete.

Kafka 4.4's own coordinator assigns no warm-ups (its refine hook returns the target unchanged),
so there is no oracle route here: the same scale-out without the switch is
test_streams_app.py's, on kcoord's shared gateway.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.kcoord import KcoordProcess
from support.streams_app import active_overlaps, held_intervals, set_group_configs
from support.streams_deployment import STATEFUL, Deployment, deploy, gateway_with, member_of
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def gateway(streams_kafka44: Any) -> Iterator[KcoordProcess]:
    """kcoord with warm-ups on, in front of the streams modules' Kafka 4.4."""
    with gateway_with(streams_kafka44.bootstrap, "streams_warmups_enabled=true") as process:
        yield process


@pytest.fixture(scope="module", params=["100", "0"], ids=["lag100", "lag0"])
def dep(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, java_classes: Path,
        gateway: KcoordProcess) -> Iterator[Deployment]:
    with deploy("kafka44", request, tmp_path_factory, gateway=gateway) as deployment:
        deployment.group_configs = {**deployment.group_configs, "streams.num.standby.replicas": "0",
                                    "streams.acceptable.recovery.lag": request.param}
        set_group_configs(deployment.bootstrap, deployment.app_id, deployment.group_configs)
        yield deployment


def test_scale_out_moves_stateful_tasks_through_warmups(dep: Deployment) -> None:
    (first,) = dep.start(1)
    dep.wait_stable()
    dep.produce()
    dep.wait_counts()
    (second,) = dep.start(1)
    warmed: dict[str, int] = {}      # task -> when a describe first showed it warming on `second`

    def moved() -> dict[str, Any] | None:
        answer = first.answer("describe")
        if answer["event"] == "describe":
            now = time.monotonic_ns()
            for m in answer["members"]:
                if m["endpoint"] == second.app_server:
                    for task in m.get("warmup", []):
                        warmed.setdefault(task, now)
        return dep.stable()
    final = wait_until(moved, 90, 0.05, lambda: f"the move settled (warm-ups seen {warmed}); {dep.report()}")
    assert final is not None
    # The instance's own view too (its "tasks" lines, every 50 ms): with no standby replica in
    # the group, a standby there is a warm-up (Streams runs warm-ups as standbys), so a short
    # warm-up between two describes is still seen.
    for line in second.events("tasks"):
        for task in set(line["standby"]):
            warmed[task] = min(warmed.get(task, line["t"]), line["t"])
    taken = set(member_of(final, second)["active"]) & STATEFUL
    assert taken, f"the second instance took no stateful task: {final}"
    assert set(warmed) >= taken, f"stateful tasks moved without a warm-up first: {sorted(taken - set(warmed))}"
    assert not set(warmed) - STATEFUL, f"warm-ups of stateless tasks: {warmed}"
    first_spans = {task: close for task, _, close in held_intervals(first) if task in taken}
    second_opens = {task: opened for task, opened, _ in held_intervals(second) if task in taken}
    for task in taken:
        assert first_spans[task] > warmed[task], f"{task}: the first instance let go before the warm-up existed"
        assert second_opens[task] > warmed[task], f"{task}: active on the second instance before its warm-up"
    assert active_overlaps(dep.apps) == []
    dep.produce()
    dep.wait_counts()
