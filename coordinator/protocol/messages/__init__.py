"""Kafka message classes by (API, version, kind): kio's, or generated where kio lacks them.

The generated modules below this package are written by `coordinator.protocol.messagegen`
from Kafka's own definitions and are never edited by hand; `index.GENERATED` lists them.
"""
from __future__ import annotations

import functools
import importlib
from types import ModuleType

from coordinator.protocol.messages.index import GENERATED


@functools.cache
def schema(api: str, version: int, kind: str = "response") -> ModuleType:
    """`schema("delete_groups", 3)` -> the module holding DeleteGroupsResponse v3."""
    if (api, version, kind) in GENERATED:
        return importlib.import_module(f"{__name__}.{api}.v{version}.{kind}")
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")
