"""Records with bytes after their key or value struct: loaded, counted and warned about.

Kafka's generated readers (`XxxValue(Readable, version)`) stop at the end of
the struct and never look at what follows, so Kafka loads such a record as if
the extra bytes were not there. kcoord must load every log Kafka loads, so the
codec does the same, but it does not stay silent: each such record is counted
(`TRAILING_BYTES`, read by the runtime, metrics and `kcoord offsets`) and
logged, rate-limited because a log written by a buggy producer may hold
millions of them. Nothing here runs for a well-formed record.
"""

from __future__ import annotations

import logging
import time

_log = logging.getLogger("kcoord.records")

WARN_INTERVAL_S = 10.0  # at most one warning per interval after the first ones
_FIRST_WARNINGS = 5     # the first few are always logged: they name real offsets to inspect


class TrailingBytesCounter:
    """Process-wide count of records decoded despite trailing bytes.

    `records` counts records (keys and values both trailing count once per part),
    `bytes` the ignored bytes; `last` is (topic, partition, offset, part, n) of the
    latest one, for an operator to look at with `kcoord offsets dump`.
    """

    __slots__ = ("records", "bytes", "last", "_warned", "_suppressed", "_next_warning")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.records = 0
        self.bytes = 0
        self.last: tuple | None = None
        self._warned = 0
        self._suppressed = 0
        self._next_warning = 0.0

    def note(self, schema: str, part: str, ignored: int, topic: str | None,
             partition: int | None, offset: int | None) -> None:
        self.records += 1
        self.bytes += ignored
        self.last = (topic, partition, offset, part, ignored)
        now = time.monotonic()
        if self._warned < _FIRST_WARNINGS or now >= self._next_warning:
            more = f" ({self._suppressed} more since the last warning)" if self._suppressed else ""
            _log.warning(
                "record at topic %s, partition %s, offset %s: %d unexpected trailing bytes after "
                "the %s %s struct; ignored as Kafka ignores them, record loaded%s "
                "(%d such records so far)", topic, partition, offset, ignored, schema, part, more,
                self.records)
            self._warned += 1
            self._suppressed = 0
            self._next_warning = now + WARN_INTERVAL_S
        else:
            self._suppressed += 1


TRAILING_BYTES = TrailingBytesCounter()
