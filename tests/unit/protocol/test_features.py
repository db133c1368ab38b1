"""The features kcoord advertises: merged per key with the upstream's, and an epoch that every
kcoord process derives alike from the map (docs/user/features.md)."""
from __future__ import annotations

from coordinator.group.offsets.txn_features import clamp_transaction_version
from coordinator.protocol import apis
from coordinator.protocol.api_versions import Features, api_versions_body, merge_features, with_consistent_epoch
from coordinator.protocol.apis import response_class
from coordinator.protocol.codec import decode_body

# What Kafka 4.4 (KRaft, defaults) finalizes: every group type on, transactions v2.
KAFKA_44 = Features(
    {"metadata.version": (7, 29), "kraft.version": (0, 1), "transaction.version": (0, 2), "group.version": (0, 1),
     "streams.version": (0, 1), "share.version": (0, 2), "eligible.leader.replicas.version": (0, 1)},
    {"metadata.version": (29, 29), "kraft.version": (1, 1), "transaction.version": (2, 2), "group.version": (1, 1),
     "streams.version": (1, 1), "share.version": (2, 2), "eligible.leader.replicas.version": (1, 1)},
    4711)
TANSU = Features({}, {}, -1)
KAFKA_39 = Features({"metadata.version": (1, 21), "kraft.version": (0, 1)}, {"metadata.version": (21, 21)}, 180)


def served(upstream: Features, txn_offset_commit_max: int | None = 5, produce_max: int | None = 12) -> Features:
    """What the gateway advertises for ``upstream`` (gateway.start's order of steps)."""
    return with_consistent_epoch(clamp_transaction_version(merge_features(upstream), txn_offset_commit_max,
                                                           produce_max))


def test_group_types_are_kcoords_the_rest_the_upstreams() -> None:
    out = served(KAFKA_44)
    assert out.finalized == {"metadata.version": (29, 29), "kraft.version": (1, 1), "transaction.version": (2, 2),
                             "group.version": (1, 1), "eligible.leader.replicas.version": (1, 1)}
    assert out.supported["group.version"] == (0, 1)
    # Not served: left out of both lists, as a Kafka broker leaves out a feature it supports only at 0.
    for name in ("streams.version", "share.version"):
        assert name not in out.supported and name not in out.finalized
    assert out.supported["transaction.version"] == (0, 2)


def test_an_upstream_that_finalizes_nothing_gets_group_version_only() -> None:
    for upstream in (TANSU, KAFKA_39):
        out = served(upstream)
        assert out.finalized == {**upstream.finalized, "group.version": (1, 1)}
        assert out.supported == {**upstream.supported, "group.version": (0, 1)}
        assert out.finalized_epoch >= 0


def test_the_epoch_depends_on_the_map_not_on_when_the_upstream_was_read() -> None:
    # Two processes read the same features at different metadata offsets (a KRaft broker's epoch).
    early = served(Features(KAFKA_44.supported, KAFKA_44.finalized, 100))
    late = served(Features(KAFKA_44.supported, KAFKA_44.finalized, 90_000))
    assert early == late
    assert served(Features({}, {}, -1)).finalized_epoch == served(Features({}, {}, 7)).finalized_epoch


def test_a_client_keeps_the_map_that_every_process_serves() -> None:
    """The Java client keeps the map of the highest epoch seen: a process that lowers
    transaction.version to 1 (it does not serve TxnOffsetCommit v5) outranks one at 2,
    whatever order the client meets them in."""
    full = served(KAFKA_44)
    lowered = served(KAFKA_44, txn_offset_commit_max=4)
    assert lowered.finalized["transaction.version"] == (1, 1) and full.finalized["transaction.version"] == (2, 2)
    assert lowered.finalized_epoch > full.finalized_epoch
    none = served(Features({}, {"group.version": (1, 1)}, 3))       # no transaction.version: level 0
    assert none.finalized_epoch > lowered.finalized_epoch


def test_maps_that_differ_elsewhere_get_different_epochs() -> None:
    other = Features(KAFKA_44.supported, {**KAFKA_44.finalized, "metadata.version": (28, 28)}, 4711)
    assert served(other).finalized_epoch != served(KAFKA_44).finalized_epoch
    assert 0 <= served(other).finalized_epoch < 2**63


def test_the_wire_carries_the_merged_map_and_epoch() -> None:
    out = served(KAFKA_44)
    response = decode_body(response_class(apis.API_VERSIONS, 4), api_versions_body(4, {18: (0, 4)}, out), 0)
    assert {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features} == out.finalized
    assert {f.name: (f.min_version, f.max_version) for f in response.supported_features} == out.supported
    assert response.finalized_features_epoch == out.finalized_epoch
