"""ApiVersions: what the gateway advertises, and the encoded answers (KIP-35, KIP-511, KIP-584).

Forwarded APIs advertise upstream's versions ∩ kio's ∩ the address caps; group APIs
advertise exactly the GroupService's versions; ApiVersions and FindCoordinator are
answered here.

Features (docs/user/features.md): upstream's, merged per key with the group types kcoord
serves itself. ``group.version`` is supported [0, 1] and finalized at 1 (kcoord serves the
consumer protocol, KIP-848, whatever the upstream finalizes); ``streams.version`` and
``share.version`` are left out of both lists, which is how a Kafka broker says it cannot
serve a feature above level 0 (BrokerFeatures.defaultSupportedFeatures lists only features
whose highest level is >= 1; a level-0 finalized feature is never listed). Tools read them
(`kafka-features.sh describe`, `Admin.describeFeatures`); clients do not pick a group
protocol from them: the Java client reads only ``transaction.version``, and librdkafka goes
by ConsumerGroupHeartbeat v1 in the API list. The finalized epoch is a function of the
finalized map alone (``with_consistent_epoch``), so every kcoord process that finalizes the
same map answers the same epoch.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from kio.schema.errors import ErrorCode

from .apis import (
    API_VERSIONS,
    FIND_COORDINATOR,
    GROUP_APIS,
    NOT_THROUGH_GATEWAY,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    forwardable_range,
    intersect,
    kio_version_range,
)
from .codec import encode_body
from .messages import schema

GROUP_VERSION_FEATURE = "group.version"
STREAMS_VERSION_FEATURE = "streams.version"
SHARE_VERSION_FEATURE = "share.version"
TRANSACTION_VERSION_FEATURE = "transaction.version"
# group.version 1 = the consumer rebalance protocol (Kafka's GroupVersion.GV_1).
GROUP_VERSION_SUPPORTED = (0, 1)
GROUP_VERSION_FINALIZED = 1
# The group-type features kcoord answers for itself, not the upstream: name -> (supported
# range, finalized level), None = not served (level 0: left out of both lists, as Kafka
# leaves out a feature it supports only at 0). Kafka 4.4 supports streams.version 0-1 and
# share.version 0-2; kcoord serves neither group type yet.
OWNED_FEATURES: dict[str, tuple[tuple[int, int], int] | None] = {
    GROUP_VERSION_FEATURE: (GROUP_VERSION_SUPPORTED, GROUP_VERSION_FINALIZED),
    STREAMS_VERSION_FEATURE: None,
    SHARE_VERSION_FEATURE: None,
}
# Finalized features a client changes its behaviour on (the Java client: transaction.version
# 2 switches producers to transactions v2, KIP-890). Ranked in the epoch, lowest level first.
CLIENT_FEATURES = (TRANSACTION_VERSION_FEATURE,)
_LEVEL_MAX = 0x7FFF          # feature levels are int16
_DIGEST_BITS = 32
# The epoch is an int64 >= 0: 15 bits of rank per client feature above the digest.
assert 15 * len(CLIENT_FEATURES) + _DIGEST_BITS <= 62

ERROR_NONE = 0
ERROR_UNSUPPORTED_VERSION = 35
ERROR_INVALID_REQUEST = 42
ERROR_REBOOTSTRAP_REQUIRED = 129

# ApiVersions v5 (KIP-1242) carries the ClusterId and NodeId the client means to reach, and a
# broker answers REBOOTSTRAP_REQUIRED when they are not its own (``rebootstrap_required``). It
# is listed only once the connection's handler makes that check: until then a v5 request gets
# the KIP-511 fallback (UNSUPPORTED_VERSION listing 0-4), and the Java 4.4 client retries at v4.
API_VERSIONS_SERVED_MAX = 5

# ApiVersionsRequest.isValid (KIP-511): name and version of the client software.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
_ZERO = timedelta(0)


def valid_client_software(name: str, version: str) -> bool:
    return bool(_SOFTWARE.fullmatch(name) and _SOFTWARE.fullmatch(version))


@dataclass(frozen=True, slots=True)
class Features:
    """Supported ranges, finalized (min, max) levels and their epoch (-1 = unknown)."""

    supported: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    finalized: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    finalized_epoch: int = -1


def owned_level(name: str) -> int:
    """The level kcoord finalizes for one of its own features (0: not served)."""
    owned = OWNED_FEATURES[name]
    return 0 if owned is None else owned[1]


def merge_features(upstream: Features) -> Features:
    """Upstream's features with kcoord's group-type features in place of the upstream's.

    Everything else (``transaction.version``, ``metadata.version``, ...) stays the
    upstream's. The epoch is the upstream's for now: the gateway replaces it with
    ``with_consistent_epoch`` once the map is final (after the transaction.version clamp);
    -1 (Tansu: unknown) becomes 0, since clients read finalized features only at >= 0.
    """
    supported = dict(upstream.supported)
    finalized = dict(upstream.finalized)
    for name, owned in OWNED_FEATURES.items():
        supported.pop(name, None)
        finalized.pop(name, None)
        if owned is not None:
            supported[name] = owned[0]
            finalized[name] = (owned[1], owned[1])
    return Features(supported, finalized, max(upstream.finalized_epoch, 0))


def with_consistent_epoch(features: Features) -> Features:
    """``features`` with a FinalizedFeaturesEpoch that is a function of its finalized map.

    The Java client keeps the finalized map of the highest epoch it has seen from any node
    (clients.ApiVersions.update), and every node it sees is a kcoord process. The upstream's
    epoch cannot order those maps: a KRaft broker answers its metadata offset, which moves
    with every metadata change and differs between brokers and between the moments two kcoord
    processes read it, and Tansu answers -1. So the epoch is derived from the map itself:
    the same map gives the same epoch in every process, and of two maps a client may act on
    differently, the one with the lower level of a ``CLIENT_FEATURES`` feature has the higher
    epoch. A client that has seen a process finalize transaction.version 1 (e.g. one that does
    not serve TxnOffsetCommit v5) stays on transactions v1, which every process serves, until
    it restarts; maps that differ only in what clients do not read are ordered by a digest.
    Always >= 0: clients treat a negative epoch as "no finalized features".
    """
    rank = 0
    for name in CLIENT_FEATURES:
        level = min(max(features.finalized.get(name, (0, 0))[1], 0), _LEVEL_MAX)
        rank = rank * (_LEVEL_MAX + 1) + (_LEVEL_MAX - level)
    canonical = ";".join(f"{name}={lo},{hi}" for name, (lo, hi) in sorted(features.finalized.items()))
    digest = int.from_bytes(hashlib.sha256(canonical.encode()).digest()[:_DIGEST_BITS // 8], "big")
    return Features(features.supported, features.finalized, (rank << _DIGEST_BITS) | digest)


def advertised_versions(
    upstream: Mapping[int, tuple[int, int]],
    service: Mapping[int, tuple[int, int]],
) -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) the gateway serves or forwards."""
    out: dict[int, tuple[int, int]] = {}
    for api_key, versions in upstream.items():
        forwarded = forwardable_range(api_key, versions)
        if forwarded is not None:
            out[api_key] = forwarded
    for api_key, versions in service.items():
        if api_key in NOT_THROUGH_GATEWAY:
            continue
        known = kio_version_range(api_key)
        served = intersect((versions[0], versions[1]), known) if known is not None else None
        if served is not None:
            out[api_key] = served
        else:
            out.pop(api_key, None)
    for api_key in GROUP_APIS - service.keys():
        out.pop(api_key, None)
    # FindCoordinator: GROUP keys are answered here, TRANSACTION keys forwarded.
    find_known = kio_version_range(FIND_COORDINATOR)
    assert find_known is not None
    find_upstream = upstream.get(FIND_COORDINATOR)
    out[FIND_COORDINATOR] = (intersect(find_upstream, find_known) if find_upstream else None) or find_known
    api_known = kio_version_range(API_VERSIONS)
    assert api_known is not None
    out[API_VERSIONS] = (api_known[0], min(api_known[1], API_VERSIONS_SERVED_MAX))
    return dict(sorted(out.items()))


def sasl_versions(upstream: Mapping[int, tuple[int, int]] | None) -> dict[int, tuple[int, int]]:
    """SaslHandshake and SaslAuthenticate, when clients authenticate (coordinator/gateway/sasl.py).

    SaslHandshake is advertised at v1 only: v0 switches the connection to raw, unframed
    tokens. SaslAuthenticate: upstream's versions ∩ kio's in passthrough (``upstream`` is
    upstream's ApiVersions), kio's when kcoord terminates SASL (``upstream`` None).
    """
    handshake = kio_version_range(SASL_HANDSHAKE)
    authenticate = kio_version_range(SASL_AUTHENTICATE)
    assert handshake is not None and authenticate is not None and handshake[1] >= 1
    if upstream is not None:
        up_handshake = upstream.get(SASL_HANDSHAKE)
        if up_handshake is None or not up_handshake[0] <= 1 <= up_handshake[1]:
            raise ValueError("SASL passthrough needs an upstream that serves SaslHandshake v1; it advertises "
                             f"{up_handshake or 'no SaslHandshake'} (use sasl.termination=true)")
        up_authenticate = upstream.get(SASL_AUTHENTICATE)
        authenticate = intersect(up_authenticate, authenticate) if up_authenticate else None  # type: ignore[assignment]
        if authenticate is None:
            raise ValueError("SASL passthrough needs an upstream that serves SaslAuthenticate; it advertises "
                             f"{up_authenticate or 'none'} (use sasl.termination=true)")
    return {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: authenticate}


def api_versions_response(
    version: int,
    api_versions: Mapping[int, tuple[int, int]],
    features: Features,
    error_code: int = ERROR_NONE,
) -> object:
    """The kio ApiVersionsResponse at ``version`` (v5: the class generated from Kafka 4.4's
    definitions, docs/design/messages.md)."""
    module = schema("api_versions", version, "response")
    cls = module.ApiVersionsResponse
    keys = tuple(module.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                 for k, (lo, hi) in sorted(api_versions.items()))
    kwargs: dict[str, object] = {"error_code": ErrorCode(error_code), "api_keys": keys}
    if version >= 1:
        kwargs["throttle_time"] = _ZERO
    if version >= 3:
        # Before v4, a supported feature whose minimum is 0 must be left out: older
        # clients reject a 0 minimum (KAFKA-17011, KAFKA-17492).
        kwargs["supported_features"] = tuple(
            module.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
            for name, (lo, hi) in sorted(features.supported.items())
            if version >= 4 or lo >= 1)
        # A feature finalized at level 0 is "off" and never listed.
        kwargs["finalized_features"] = tuple(
            module.FinalizedFeatureKey(name=name, min_version_level=lo, max_version_level=hi)
            for name, (lo, hi) in sorted(features.finalized.items()) if hi >= 1)
        kwargs["finalized_features_epoch"] = features.finalized_epoch
    return cls(**kwargs)


def api_versions_body(version: int, api_versions: Mapping[int, tuple[int, int]], features: Features,
                      error_code: int = ERROR_NONE) -> bytes:
    return encode_body(api_versions_response(version, api_versions, features, error_code))


def api_versions_bodies(api_versions: Mapping[int, tuple[int, int]], features: Features) -> dict[int, bytes]:
    """The answer to each ApiVersions version listed in ``api_versions``, encoded once."""
    low, high = api_versions[API_VERSIONS]
    return {v: api_versions_body(v, api_versions, features) for v in range(low, high + 1)}


def invalid_request_body(version: int) -> bytes:
    """Kafka's answer to a v3+ request with an illegal client software name/version."""
    return api_versions_body(version, {}, Features(), ERROR_INVALID_REQUEST)


def rebootstrap_required(version: int, request: object, cluster_id: str | None, node_id: int | None) -> bool:
    """KIP-1242: a v5+ request whose ClusterId is set names the cluster and node the client
    means to reach; when either is not this listener's, Kafka answers REBOOTSTRAP_REQUIRED
    (KafkaApis.handleApiVersionsRequest) and the client bootstraps again. ``node_id`` None: a
    listener that is no one node (a single process's bootstrap listener): only the cluster id
    is checked."""
    wanted = getattr(request, "cluster_id", None) if version >= 5 else None
    if wanted is None:
        return False
    if wanted != cluster_id:
        return True
    return node_id is not None and getattr(request, "node_id", -1) != node_id


def rebootstrap_body(version: int) -> bytes:
    """Kafka's REBOOTSTRAP_REQUIRED answer: the error, no API keys, no features."""
    return api_versions_body(version, {}, Features(), ERROR_REBOOTSTRAP_REQUIRED)


def unsupported_version_body(supported: tuple[int, int]) -> bytes:
    """UNSUPPORTED_VERSION in the v0 format, listing only our ApiVersions range (KIP-511).

    A client that sent a version we do not know can always read v0, and retries with
    the highest version listed here.
    """
    return api_versions_body(0, {API_VERSIONS: supported}, Features(), ERROR_UNSUPPORTED_VERSION)


def parse_upstream_api_versions(response: object) -> tuple[dict[int, tuple[int, int]], Features]:
    """(api_key -> range, features) out of an upstream kio ApiVersionsResponse."""
    versions = {int(k.api_key): (int(k.min_version), int(k.max_version))
                for k in response.api_keys}  # type: ignore[attr-defined]
    supported = {f.name: (int(f.min_version), int(f.max_version))
                 for f in getattr(response, "supported_features", ())}
    finalized = {f.name: (int(f.min_version_level), int(f.max_version_level))
                 for f in getattr(response, "finalized_features", ())}
    epoch = int(getattr(response, "finalized_features_epoch", -1))
    return versions, Features(supported, finalized, epoch)
