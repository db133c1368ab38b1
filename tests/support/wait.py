"""Bounded waits on a condition. Tests wait on what they need, never on a clock."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """The condition did not hold within the bound. An AssertionError so pytest shows a failure."""


def wait_until(
    predicate: Callable[[], T],
    timeout: float,
    interval: float = 0.05,
    message: str | Callable[[], str] = "condition",
) -> T:
    """Call ``predicate`` until it returns a truthy value and return that value.

    Raises WaitTimeout after ``timeout`` seconds; ``message`` (a string or a callable
    building one at failure time, so it can describe the state) names what was awaited.
    Exceptions raised by the predicate propagate: a broken check should fail loudly.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            text = message() if callable(message) else message
            raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for: {text} (last value: {value!r})")
        time.sleep(min(interval, remaining))
