"""Which upstream clusters an integration test runs against.

A test that uses the ``upstream`` fixture (directly, or through ``kcoord``/``gateway``) under
tests/integration, and does not ask for ``tansu`` itself, is parametrized over

    tansu, kafka44                       every such test (Kafka 4.4 is the reference)
    kafka44-3node, kafka43, kafka39      tests marked ``@pytest.mark.kafka_subset``
    kafka-docker                         the subset, where a Docker engine answers (testcontainers)

``KCOORD_UPSTREAMS=tansu,kafka44`` (comma-separated ids) narrows the set, e.g. on a machine
without Java; ``KCOORD_UPSTREAMS=all`` runs every test against every upstream.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

# upstream id -> session fixture (tests/conftest.py)
FIXTURES = {
    "tansu": "tansu",
    "kafka44": "kafka44",
    "kafka44-3node": "kafka44_3node",
    "kafka43": "kafka43",
    "kafka39": "kafka39",
    "kafka-docker": "kafka_docker",
}
EVERYWHERE = ("tansu", "kafka44")
SUBSET_ONLY = ("kafka44-3node", "kafka43", "kafka39")
SUBSET_MARKER = "kafka_subset"
# Directories under tests/integration whose every test is in the subset.
SUBSET_DIRS = ("consumer_protocol",)


@lru_cache(maxsize=1)
def _docker() -> bool:
    from .apache_kafka import docker_available

    return docker_available()


def upstream_ids(in_subset: bool) -> list[str]:
    wanted = os.environ.get("KCOORD_UPSTREAMS", "").strip()
    ids = list(EVERYWHERE)
    if in_subset or wanted == "all":
        ids += SUBSET_ONLY
        if _docker():
            ids.append("kafka-docker")
    if wanted and wanted != "all":
        allowed = {w.strip() for w in wanted.split(",")}
        unknown = allowed - set(FIXTURES)
        if unknown:
            raise ValueError(f"KCOORD_UPSTREAMS names unknown upstreams {sorted(unknown)}; known: {sorted(FIXTURES)}")
        ids = [i for i in ids if i in allowed]
    return ids


def cluster(request, tansu: str = "tansu"):
    """The body of an ``upstream`` fixture: the session cluster its parameter names (Tansu when
    unparametrized); ``tansu`` is the fixture the ``tansu`` id stands for."""
    kind = getattr(request, "param", "tansu")
    return request.getfixturevalue(tansu if kind == "tansu" else FIXTURES[kind])


def parametrize(metafunc) -> None:
    """pytest_generate_tests body: parametrize ``upstream`` (indirect, at the scope its fixture
    has: a directory may make it module-scoped to share a gateway per module and upstream)."""
    if "upstream" not in metafunc.fixturenames or "tansu" in metafunc.fixturenames:
        return
    fixturedefs = metafunc._arg2fixturedefs.get("upstream")
    if not fixturedefs or fixturedefs[-1].params is not None:
        return     # parametrized by its own definition
    for marker in metafunc.definition.iter_markers("parametrize"):
        names = marker.args[0] if marker.args else marker.kwargs.get("argnames", "")
        if "upstream" in ([n.strip() for n in names.split(",")] if isinstance(names, str) else names):
            return     # the test names its upstreams itself
    in_subset = (metafunc.definition.get_closest_marker(SUBSET_MARKER) is not None
                 or any(part in SUBSET_DIRS for part in Path(str(metafunc.definition.path)).parts))
    ids = upstream_ids(in_subset)
    metafunc.parametrize("upstream", ids, indirect=True, ids=ids, scope=fixturedefs[-1].scope)
