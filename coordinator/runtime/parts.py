"""A class made of parts keeps the names its callers use: `Forward` is an attribute (or a
method) that lives in one of the parts, read and written (or called) there (the runtime's
writer/loader/txn parts, the fenced state log's links/producers/reads, the gateway's
client connection's flow and identity parts).

Rules:
- Only for state or a method a caller or a test reaches by its old name; a part's own code
  uses the part directly.
"""
from __future__ import annotations

from typing import Any


class Forward:
    __slots__ = ("part", "name")

    def __init__(self, part: str, name: str) -> None:
        self.part, self.name = part, name

    def __get__(self, owner_object: Any, owner: Any = None) -> Any:
        return self if owner_object is None else getattr(getattr(owner_object, self.part), self.name)

    def __set__(self, owner_object: Any, value: Any) -> None:
        setattr(getattr(owner_object, self.part), self.name, value)
