"""UpdateFeatures (API 57) through kcoord: the group-type features are kcoord's, not the upstream's.

Rules (docs/user/features.md, "Changing features"):
- kcoord answers ApiVersions with its own levels of ``group.version``, ``streams.version`` and
  ``share.version`` (api_versions.OWNED_FEATURES): they say which group types kcoord serves.
  Forwarding an update of one of them would change the upstream's coordinator, not kcoord,
  and the next ApiVersions through kcoord would still show kcoord's level.
- An update of an owned feature to a level other than kcoord's refuses the whole request with
  INVALID_UPDATE_VERSION, in the words of Kafka's controller ("Invalid update version L for
  feature F. <why>"): Kafka applies a request's updates all or none (FeatureControlManager
  stops at the first invalid one and writes nothing), so nothing of it reaches the upstream's
  features either.
- An update of an owned feature to kcoord's own level changes nothing: it is taken out, and the
  rest is forwarded as it was.
- Either way the request still goes upstream (without its owned updates, and with no update at
  all when refused), so the upstream decides first what only it can: whether the client may
  ALTER the CLUSTER (CLUSTER_AUTHORIZATION_FAILED), and the other features' updates. Its error
  wins; with none, the refusal above is the answer. Versions 0-1 list a result per requested
  feature: the upstream's where it gave one, else the request's error (Kafka gives every
  feature the request's error, UpdateFeaturesResponse.createWithErrors).
- A request naming no owned feature is forwarded unchanged (``decide`` returns None).
"""
from __future__ import annotations

import dataclasses
import sys
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.api_versions import OWNED_FEATURES, owned_level
from ..protocol.apis import response_class
from ..protocol.codec import decode_response_frame, encode_response_frame
from .state_guard import Split, StateTopicGuard

UPDATE_FEATURES = 57
RULE_FEATURES = "features"       # metric label value (fixed)
# UpdateFeaturesResponse v2 no longer lists per-feature results (its Results are "0-1").
FIRST_VERSION_WITHOUT_RESULTS = 2


def requested_level(update: Any) -> int:
    """The level an update asks for: MaxVersionLevel < 1 asks to delete the feature (level 0)."""
    return max(int(update.max_version_level), 0)


def refusal(update: Any) -> str | None:
    """Kafka's message for an owned feature's update that kcoord refuses; None: a no-op."""
    name, level = update.feature, requested_level(update)
    served = owned_level(name)
    if level == served:
        return None
    return (f"Invalid update version {int(update.max_version_level)} for feature {name}. "
            f"kcoord serves {name} itself, at level {served}, whatever the upstream cluster finalizes; "
            f"it cannot be changed through kcoord (to change the upstream's, send UpdateFeatures to the "
            f"upstream cluster directly).")


def decide(version: int, request: Any, frame: bytes, body_offset: int) -> Split | None:
    """None to forward ``request`` unchanged, or the Split that forwards it without its owned
    updates (all of them when one is refused) and completes the upstream's answer."""
    updates = tuple(request.feature_updates)
    owned = [i for i, u in enumerate(updates) if u.feature in OWNED_FEATURES]
    if not owned:
        return None
    refused = [message for message in (refusal(updates[i]) for i in owned) if message is not None]
    error = (ErrorCode.invalid_update_version, refused[0]) if refused else None
    dropped = list(range(len(updates))) if refused else owned
    names = tuple(dict.fromkeys(u.feature for u in updates))
    note = refused[0] if refused else \
        f"{', '.join(updates[i].feature for i in owned)} at kcoord's own level: taken out, the rest forwarded"
    # StateTopicGuard._split cuts entries out of a decoded request, header unchanged.
    return StateTopicGuard._split(request, "feature_updates", dropped, frame, body_offset,
                                  _merger(version, names, error), note, RULE_FEATURES)


def _merger(version: int, names: tuple[str, ...], error: tuple[ErrorCode, str] | None) -> Any:
    def merge(answer: bytes) -> bytes:
        correlation_id, response = decode_response_frame(UPDATE_FEATURES, version, answer)
        code, message = response.error_code, response.error_message
        if code == ErrorCode.none and error is not None:
            code, message = error
        changes: dict[str, Any] = {"error_code": code, "error_message": message}
        if version < FIRST_VERSION_WITHOUT_RESULTS:
            given = {r.feature: r for r in response.results} if error is None else {}
            result = sys.modules[response_class(UPDATE_FEATURES, version).__module__].UpdatableFeatureResult
            changes["results"] = tuple(given.get(name) or result(feature=name, error_code=code, error_message=message)
                                       for name in names)
        return encode_response_frame(UPDATE_FEATURES, version, correlation_id,
                                     dataclasses.replace(response, **changes))
    return merge

