"""Unique topic and group names, so tests sharing one broker never see each other's data."""
from __future__ import annotations

import itertools
import os
import re
import uuid

_counter = itertools.count(1)
_LEGAL = re.compile(r"[^a-zA-Z0-9._-]")  # Kafka's legal topic characters


def unique_name(prefix: str) -> str:
    """``prefix`` plus a process-unique suffix, trimmed to Kafka's legal topic characters."""
    base = _LEGAL.sub("-", prefix)[:120].strip("-") or "x"
    return f"{base}-{os.getpid()}-{next(_counter)}-{uuid.uuid4().hex[:6]}"


class TestNames:
    """Names derived from one test's name: ``names.topic()``, ``names.group("late")``."""

    __test__ = False  # not a pytest test class

    def __init__(self, test_name: str) -> None:
        self.base = _LEGAL.sub("-", test_name)[:60]

    def topic(self, tag: str = "t") -> str:
        return unique_name(f"{self.base}-{tag}")

    def group(self, tag: str = "g") -> str:
        return unique_name(f"{self.base}-{tag}")
