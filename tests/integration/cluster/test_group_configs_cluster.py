"""Per-group configuration across a kcoord cluster (docs/user/group-configs.md, "Several
processes"), on Tansu and Kafka 4.4: Kafka's Admin sends DescribeConfigs and
IncrementalAlterConfigs for GROUP resources to any node (the least loaded) and
ListConfigResources to one, so whichever instance a request reaches must answer for every
group, whoever owns its shard: it asks the owner over the instances' links to each other, in
an Envelope (API 58) carrying the client (docs/user/cluster.md)."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

from coordinator.protocol import envelope
from support import group_probe as probe
from support.kcoord import CLUSTER, KcoordProcess, start_all
from support.names import unique_name
from support.raw_client import call, call_with, request_types
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
def upstream(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Tansu and Kafka 4.4 (support.upstreams parametrizes it), one trio per module and upstream."""
    from support.upstreams import FIXTURES

    return request.getfixturevalue(FIXTURES[getattr(request, "param", "tansu")])


@pytest.fixture(scope="module")
def trio(upstream) -> Iterator[list[KcoordProcess]]:  # type: ignore[no-untyped-def]
    """Three settled instances (the config APIs do not depend on the upstream; the membership does)."""
    state = unique_name("__kc_cfg_trio")
    procs = [KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER,
                           extra_args=("--instance-id", f"kc-{i}")) for i in range(3)]
    try:
        start_all(procs, timeout=120)
        yield procs
    finally:
        for p in procs:
            if p.running():
                p.stop()


def advertised(process: KcoordProcess) -> dict[int, int]:
    """The highest version of each API the instance lists in ApiVersions."""
    versions = call_with(process.bootstrap, 18, 3, client_software_name="t", client_software_version="1")
    return {int(k.api_key): int(k.max_version) for k in versions.api_keys}


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
    if advertised(trio[2]).get(LIST, -1) < 1:
        return      # ListConfigResources v1 is served where the upstream has it (Kafka 4.1+; not Tansu)
    listed = {r.resource_name for r in call_with(trio[2].bootstrap, LIST, 1, resource_types=(GROUP,)).config_resources}
    assert set(groups) <= listed, sorted(set(groups) - listed)


def test_an_envelope_is_answered_not_advertised_and_its_bad_parts_get_kafkas_errors(trio, names) -> None:  # type: ignore[no-untyped-def]
    """What another instance sends, sent by hand: kcoord lists no API 58 in ApiVersions, answers
    an Envelope from its own shards (no authorizer here: every principal may send one), and a
    bad principal or address with Kafka's error, the connection kept."""
    assert 58 not in advertised(trio[0])
    group = owned_groups(trio, names.group())[0]
    wait_until(lambda: described(trio[0], [group])[group][0] == 0, 30, message=f"{group}'s shard loaded")
    mod = request_types(DESCRIBE, 4)
    ask = mod.DescribeConfigsRequest(include_synonyms=False, include_documentation=False, resources=(
        mod.DescribeConfigsResource(resource_type=GROUP, resource_name=group, configuration_keys=(KEY,)),))
    good = envelope.wrap(ask, "by-hand", "User:alice", "127.0.0.1")
    answer = call(trio[0].bootstrap, 58, 0, good)
    assert answer.error_code == 0
    (result,) = envelope.opened(DESCRIBE, 4, answer).results
    assert (result.resource_name, int(result.error_code)) == (group, 0)
    assert call(trio[0].bootstrap, 58, 0, dataclasses.replace(good, request_principal=b"\x00\x07")).error_code == \
        ErrorCode.principal_deserialization_failure
    assert call(trio[0].bootstrap, 58, 0, dataclasses.replace(good, client_host_address=b"\x01")).error_code == \
        ErrorCode.invalid_request
