"""Kafka's message definitions (the JSON in its jars), parsed.

Kafka's format (`clients/src/main/resources/common/message/README.md` in Kafka): a
message has `validVersions`, `flexibleVersions` and `fields`; a field has `versions`,
optional `nullableVersions`, `taggedVersions` + `tag`, `default`, `entityType`,
`ignorable`, and nested `fields` when its type names a struct (`Foo` or `[]Foo`);
`commonStructs` are structs shared by name. Files carry `//` comment lines.
"""
from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)
PRIMITIVES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint16", "uint32",
                        "uint64", "float64", "string", "bytes", "uuid", "records"})


@dataclass(frozen=True, slots=True)
class Versions:
    """A version range: "0+", "1-3", "5", or "none"."""

    low: int
    high: int | None  # None: open-ended

    @classmethod
    def parse(cls, text: str | None) -> Versions | None:
        if text is None or text == "none":
            return None
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        low, _, high = text.partition("-")
        return cls(int(low), int(high or low))

    def __contains__(self, version: int) -> bool:
        return version >= self.low and (self.high is None or version <= self.high)


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: str                      # "int32", "[]string", "Foo", "[]Foo"
    versions: Versions | None
    nullable: Versions | None
    tagged: Versions | None
    tag: int | None
    default: str | int | float | bool | None
    entity_type: str | None
    ignorable: bool
    about: str | None
    fields: tuple[Field, ...] | None  # a struct declared inline

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def item_type(self) -> str:
        return self.type.removeprefix("[]")

    def present(self, version: int) -> bool:
        return self.versions is not None and version in self.versions

    def tag_at(self, version: int) -> int | None:
        return self.tag if self.tagged is not None and version in self.tagged else None

    def nullable_at(self, version: int) -> bool:
        return self.nullable is not None and version in self.nullable


@dataclass(frozen=True, slots=True)
class Message:
    name: str                      # "DeleteGroupsResponse"
    type: str                      # "request", "response", "header", "data", "coordinator-key", ...
    api_key: int | None
    valid: Versions | None
    flexible: Versions | None
    fields: tuple[Field, ...]
    common: dict[str, tuple[Field, ...]]
    source: str                    # file name inside the jar

    def versions(self) -> range:
        if self.valid is None:
            return range(0)
        high = self.valid.high if self.valid.high is not None else self.valid.low
        return range(self.valid.low, high + 1)

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version in self.flexible


def _field(raw: dict) -> Field:
    # Kafka's generator falls back to taggedVersions when versions is absent.
    versions = raw.get("versions", raw.get("taggedVersions"))
    nested = raw.get("fields")
    return Field(
        name=raw["name"], type=raw["type"], versions=Versions.parse(versions),
        nullable=Versions.parse(raw.get("nullableVersions")),
        tagged=Versions.parse(raw.get("taggedVersions")), tag=raw.get("tag"),
        default=raw.get("default"), entity_type=raw.get("entityType"),
        ignorable=bool(raw.get("ignorable", False)), about=raw.get("about"),
        fields=tuple(_field(f) for f in nested) if nested is not None else None)


def parse(text: str, source: str) -> Message:
    raw = json.loads(_COMMENT.sub("", text))
    common = {s["name"]: tuple(_field(f) for f in s.get("fields", ()))
              for s in raw.get("commonStructs", ())}
    return Message(
        name=raw["name"], type=raw["type"], api_key=raw.get("apiKey"),
        valid=Versions.parse(raw.get("validVersions")),
        flexible=Versions.parse(raw.get("flexibleVersions")),
        fields=tuple(_field(f) for f in raw.get("fields", ())), common=common, source=source)


def read_jar(jar: Path, folder: str = "common/message/") -> Iterator[Message]:
    """Every definition under `folder` in a Kafka jar, in name order."""
    with zipfile.ZipFile(jar) as archive:
        for name in sorted(archive.namelist()):
            if name.startswith(folder) and name.endswith(".json"):
                yield parse(archive.read(name).decode("utf-8"), name)
