"""transaction.version as kcoord may advertise it (coordinator/group/offsets/txn_features.py)."""
from __future__ import annotations

from coordinator.group.offsets.txn_features import clamp_transaction_version
from coordinator.protocol.api_versions import Features

KAFKA_43 = Features({"transaction.version": (0, 2), "group.version": (0, 1)},
                    {"transaction.version": (2, 2), "group.version": (1, 1)}, 7)


def test_level_2_only_with_txn_offset_commit_v5_and_produce_v12():
    assert clamp_transaction_version(KAFKA_43, 5, 12) == KAFKA_43
    for served, produce in ((None, 12), (4, 12), (5, 9), (5, None)):
        out = clamp_transaction_version(KAFKA_43, served, produce)
        assert out.finalized["transaction.version"] == (1, 1), (served, produce)
        assert out.supported["transaction.version"] == (0, 1)
        assert out.finalized["group.version"] == (1, 1) and out.finalized_epoch == 7


def test_an_upstream_without_the_feature_is_left_alone():
    tansu = Features({}, {}, -1)
    assert clamp_transaction_version(tansu, None, 9) == tansu
