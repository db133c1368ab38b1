"""Which membership kcoord uses on an upstream (coordinator/cluster/membership.py
static_membership_works, coordinator/clustered.py static_membership)."""
from __future__ import annotations

import pytest

from coordinator.cluster.upstream import static_membership_works
from coordinator.clustered import static_membership
from coordinator.config import CoordinatorConfig

# What the upstreams here list in ApiVersions v3 (probed 2026-11-25).
TANSU_06 = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 24, 25, 26, 28, 29, 30, 32, 36,
            42, 44, 46, 50, 51, 60, 69, 71, 75}


def test_static_members_on_kafka_dynamic_on_tansu():
    assert not static_membership_works(TANSU_06)
    assert static_membership_works(TANSU_06 | {23})      # OffsetForLeaderEpoch: every Kafka since 0.11


@pytest.mark.parametrize("value, expected", [("auto", None), ("", None), ("TRUE", True), ("false", False)])
def test_the_setting_is_read(value, expected):
    assert static_membership(CoordinatorConfig(cluster_static_membership=value)) is expected


def test_a_bad_setting_names_itself():
    with pytest.raises(ValueError, match="cluster.static.membership='sometimes'"):
        static_membership(CoordinatorConfig(cluster_static_membership="sometimes"))
