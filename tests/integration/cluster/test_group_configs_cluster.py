"""Per-group configuration across a kcoord cluster (docs/user/group-configs.md, "Several
processes"), on Kafka 4.4: Kafka's Admin sends DescribeConfigs and IncrementalAlterConfigs for
GROUP resources to any node (the least loaded) and ListConfigResources to one, so whichever
instance a request reaches must answer for every group, whoever owns its shard: it asks the
owner over the instances' links to each other (docs/user/cluster.md)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from support import group_probe as probe
from support.kcoord import CLUSTER, KcoordProcess, start_all
from support.names import unique_name
from support.raw_client import call_with, request_types
from support.wait import wait_until

pytestmark = pytest.mark.integration

GROUP, DESCRIBE, INCREMENTAL, LIST, SET = 32, 32, 44, 74, 0
KEY = "consumer.session.timeout.ms"
SHARDS = 12


def owners(procs: list[KcoordProcess], groups: list[str]) -> dict[str, int] | None:
    """Each group's coordinator port if every instance names the same one, else None."""
    out = {}
    for g in groups:
        answers = {probe.find(p.bootstrap, g) for p in procs}
        if len(answers) != 1 or next(iter(answers))[0] != 0:
            return None
        out[g] = next(iter(answers))[3]
    return out


def owned_groups(procs: list[KcoordProcess], prefix: str) -> list[str]:
    """One group name per instance, owned by it (in the instances' order)."""
    candidates = [f"{prefix}-{i}" for i in range(60)]
    found = wait_until(lambda: owners(procs, candidates), 60, message="the instances agree on the coordinators")
    return [next(g for g in candidates if found[g] == p.port) for p in procs]


@pytest.fixture(scope="module")
def trio(kafka44) -> Iterator[list[KcoordProcess]]:  # type: ignore[no-untyped-def]
    """Three settled instances on Kafka 4.4 (the reference upstream; the config APIs do not
    depend on it)."""
    state = unique_name("__kc_cfg_trio")
    procs = [KcoordProcess(kafka44.bootstrap, state, state_partitions=SHARDS, config=CLUSTER,
                           extra_args=("--instance-id", f"kc-{i}")) for i in range(3)]
    try:
        start_all(procs, timeout=120)
        yield procs
    finally:
        for p in procs:
            if p.running():
                p.stop()


def alter(process: KcoordProcess, values: dict[str, str]) -> list[tuple[str, int]]:
    mod = request_types(INCREMENTAL, 1)
    return [(a.resource_name, int(a.error_code)) for a in call_with(
        process.bootstrap, INCREMENTAL, 1, validate_only=False, resources=tuple(
            mod.AlterConfigsResource(resource_type=GROUP, resource_name=g, configs=(
                mod.AlterableConfig(name=KEY, config_operation=SET, value=v),)) for g, v in values.items())).responses]


def described(process: KcoordProcess, groups: list[str]) -> dict[str, tuple[int, str | None]]:
    mod = request_types(DESCRIBE, 4)
    results = call_with(process.bootstrap, DESCRIBE, 4, include_synonyms=False, include_documentation=False,
                        resources=tuple(mod.DescribeConfigsResource(resource_type=GROUP, resource_name=g,
                                                                    configuration_keys=(KEY,)) for g in groups)).results
    return {r.resource_name: (int(r.error_code), next((c.value for c in r.configs), None)) for r in results}


def test_configs_set_through_one_instance_are_described_and_listed_through_the_others(trio, names) -> None:  # type: ignore[no-untyped-def]
    groups = owned_groups(trio, names.group())
    for owner, g in zip(trio, groups):    # a shard just taken may still be loading (COORDINATOR_LOAD_IN_PROGRESS)
        wait_until(lambda o=owner, g=g: described(o, [g])[g][0] == 0, 30, message=f"{g}'s shard loaded")
    values = {g: str(50_000 + 1_000 * i) for i, g in enumerate(groups)}
    assert alter(trio[0], values) == [(g, 0) for g in groups]
    assert described(trio[1], groups) == {g: (0, v) for g, v in values.items()}
    listed = {r.resource_name for r in call_with(trio[2].bootstrap, LIST, 1, resource_types=(GROUP,)).config_resources}
    assert set(groups) <= listed, sorted(set(groups) - listed)
