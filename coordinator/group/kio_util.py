"""Version-generic construction of kio messages.

kio generates one dataclass module per API version. Handlers build the response
from one superset of keyword arguments; `build` keeps the fields that exist at the
request's version, so version differences live in kio's schemas, not in handlers.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
from types import ModuleType


@functools.cache
def schema(api: str, version: int, kind: str = "response") -> ModuleType:
    """`schema("offset_commit", 9)` -> kio.schema.offset_commit.v9.response."""
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type, **kwargs):
    names = _field_names(cls)
    return cls(**{k: v for k, v in kwargs.items() if k in names})


