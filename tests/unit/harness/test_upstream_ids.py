"""Which upstreams an integration test is parametrized over (support.upstreams)."""
from __future__ import annotations

import pytest

from support import upstreams


@pytest.fixture(autouse=True)
def no_docker(monkeypatch):
    monkeypatch.setattr(upstreams, "_docker", lambda: False)
    monkeypatch.delenv("KCOORD_UPSTREAMS", raising=False)


def test_every_test_gets_tansu_and_kafka44_the_subset_also_three_nodes_43_and_39():
    assert upstreams.upstream_ids(in_subset=False) == ["tansu", "kafka44"]
    assert upstreams.upstream_ids(in_subset=True) == ["tansu", "kafka44", "kafka44-3node", "kafka43", "kafka39"]


def test_docker_kafka_joins_the_subset_where_docker_answers(monkeypatch):
    monkeypatch.setattr(upstreams, "_docker", lambda: True)
    assert upstreams.upstream_ids(in_subset=True)[-1] == "kafka-docker"
    assert "kafka-docker" not in upstreams.upstream_ids(in_subset=False)


def test_env_narrows_or_widens_the_set(monkeypatch):
    monkeypatch.setenv("KCOORD_UPSTREAMS", "tansu")
    assert upstreams.upstream_ids(in_subset=True) == ["tansu"]
    monkeypatch.setenv("KCOORD_UPSTREAMS", "all")
    assert upstreams.upstream_ids(in_subset=False) == ["tansu", "kafka44", "kafka44-3node", "kafka43", "kafka39"]
    monkeypatch.setenv("KCOORD_UPSTREAMS", "tansu,kafka42")
    with pytest.raises(ValueError, match="kafka42"):
        upstreams.upstream_ids(in_subset=False)


def test_every_upstream_id_names_a_fixture():
    assert set(upstreams.EVERYWHERE + upstreams.SUBSET_ONLY) < set(upstreams.FIXTURES)
