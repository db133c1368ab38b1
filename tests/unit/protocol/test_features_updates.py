"""UpdateFeatures through kcoord (coordinator/gateway/feature_updates.py): kcoord's group-type
features are refused or taken out, the rest forwarded, the upstream's answer completed."""
from __future__ import annotations

import sys
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from coordinator.gateway.feature_updates import UPDATE_FEATURES, decide
from coordinator.protocol.apis import request_header_version, response_class
from coordinator.protocol.codec import decode_body, decode_response_frame, encode_response_frame
from coordinator.protocol.framing import body_offset
from support.raw_client import encode_request, request_types


def _request(version: int, *updates: tuple[str, int]):  # type: ignore[no-untyped-def]
    m = request_types(UPDATE_FEATURES, version)
    extra = {"allow_downgrade": False} if version == 0 else {"upgrade_type": 1}
    keys = tuple(m.FeatureUpdateKey(feature=name, max_version_level=level, **extra) for name, level in updates)
    fields = {"validate_only": False} if version >= 1 else {}
    body = m.UpdateFeaturesRequest(timeout=timedelta(seconds=60), feature_updates=keys, **fields)
    frame = encode_request(UPDATE_FEATURES, version, 7, body)
    return body, frame, body_offset(frame, request_header_version(UPDATE_FEATURES, version))


def _upstream_answer(version: int, code: int = 0, message: str | None = None,
                     results: tuple[tuple[str, int], ...] = ()) -> bytes:
    cls = response_class(UPDATE_FEATURES, version)
    m = sys.modules[cls.__module__]
    fields = {}
    if version < 2:
        fields["results"] = tuple(m.UpdatableFeatureResult(feature=n, error_code=ErrorCode(c), error_message=None)
                                  for n, c in results)
    return encode_response_frame(UPDATE_FEATURES, version, 7, cls(
        throttle_time=timedelta(0), error_code=ErrorCode(code), error_message=message, **fields))


def _forwarded(split, version: int):  # type: ignore[no-untyped-def]
    cls = request_types(UPDATE_FEATURES, version).UpdateFeaturesRequest
    offset = body_offset(split.frame, request_header_version(UPDATE_FEATURES, version))
    assert split.frame[4:12] == _request(version)[1][4:12]      # same key, version, correlation id
    return [(u.feature, u.max_version_level) for u in decode_body(cls, split.frame, offset).feature_updates]


def test_a_request_without_kcoords_features_is_forwarded_unchanged() -> None:
    assert decide(1, *_request(1, ("transaction.version", 2), ("metadata.version", 29))) is None


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("update", [("streams.version", 1), ("share.version", 2), ("group.version", 0),
                                    ("group.version", -1)])
def test_a_change_of_a_kcoord_feature_refuses_the_whole_request(version: int, update: tuple[str, int]) -> None:
    split = decide(version, *_request(version, update, ("transaction.version", 2)))
    assert split is not None and _forwarded(split, version) == []   # upstream still authorizes, changes nothing
    _, answer = decode_response_frame(UPDATE_FEATURES, version, split.merge(_upstream_answer(version)))
    assert answer.error_code == ErrorCode.invalid_update_version
    assert answer.error_message.startswith(f"Invalid update version {update[1]} for feature {update[0]}. ")
    if version < 2:
        assert [(r.feature, r.error_code) for r in answer.results] == [
            (update[0], ErrorCode.invalid_update_version), ("transaction.version", ErrorCode.invalid_update_version)]


def test_the_upstreams_refusal_wins() -> None:
    split = decide(1, *_request(1, ("streams.version", 1)))
    assert split is not None
    _, answer = decode_response_frame(UPDATE_FEATURES, 1, split.merge(
        _upstream_answer(1, ErrorCode.cluster_authorization_failed, "denied")))
    assert (answer.error_code, answer.error_message) == (ErrorCode.cluster_authorization_failed, "denied")
    assert [(r.feature, r.error_code) for r in answer.results] == [
        ("streams.version", ErrorCode.cluster_authorization_failed)]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_kcoords_own_level_is_taken_out_and_the_rest_forwarded(version: int) -> None:
    split = decide(version, *_request(version, ("group.version", 1), ("transaction.version", 2),
                                      ("streams.version", 0)))
    assert split is not None and _forwarded(split, version) == [("transaction.version", 2)]
    _, answer = decode_response_frame(UPDATE_FEATURES, version, split.merge(
        _upstream_answer(version, results=(("transaction.version", 0),))))
    assert answer.error_code == ErrorCode.none
    if version < 2:
        assert [(r.feature, r.error_code) for r in answer.results] == [
            ("group.version", 0), ("transaction.version", 0), ("streams.version", 0)]
