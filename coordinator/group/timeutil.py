"""kio models durations as `timedelta`; the core thinks in milliseconds."""
from __future__ import annotations

import functools
from datetime import timedelta

_MS = timedelta(milliseconds=1)


def to_ms(td: timedelta | int) -> int:
    return td if isinstance(td, int) else td // _MS


@functools.lru_cache(maxsize=1024)
def from_ms(ms: int) -> timedelta:
    return timedelta(milliseconds=ms)
