"""Rate-limited log lines for what clients can trigger at will (bad frames, refused requests).

Rules: at most ``rate`` lines per second per limiter (a token bucket holding one second's
worth, so a short burst of distinct faults is still seen in full); lines over the rate are
counted, not written, and the next written line says how many were suppressed. A rate of
0 writes none (the metrics still count every event). One bad frame per line would
otherwise let any client fill the disk.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

from .limits import TokenBucket


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, rate_per_second: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        # The bucket holds at least one token, so a rate below 1 still writes a line now
        # and then (one every 1/rate seconds); a rate of 0 gives none.
        rate = max(0.0, float(rate_per_second))
        self._bucket = TokenBucket(rate, clock, capacity=max(1.0, rate))
        self.suppressed = 0          # lines dropped since the last one written

    def allow(self) -> bool:
        """True if a line may be written now (takes a token); False counts a suppression."""
        if self._bucket.take():
            return True
        self.suppressed += 1
        return False

    def log(self, level: int, msg: str, *args: object) -> bool:
        """Writes ``msg % args`` unless over the rate; returns whether it was written."""
        if not self.allow():
            return False
        if self.suppressed:
            msg += " (%d similar lines suppressed)"
            args = (*args, self.suppressed)
            self.suppressed = 0
        self._log.log(level, msg, *args)
        return True
