"""Version-generic construction of kio messages, for the builders of the protocol layer.

kio generates one dataclass module per API version. A builder passes one superset of
keyword arguments; `build` keeps the fields that exist at the message's version, so
version differences live in kio's schemas, not in the builders.
"""
from __future__ import annotations

import dataclasses
import functools
from datetime import timedelta

from .messages import schema  # noqa: F401  kio's module, or the generated one (docs/design/messages.md)

# Kafka's "no throttle" (ThrottleTimeMs 0), as kio's durations.
NO_THROTTLE = timedelta(0)


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type, **kwargs):
    names = _field_names(cls)
    return cls(**{k: v for k, v in kwargs.items() if k in names})
