"""The client-side assignor interface (docs/design/client-assignors-spec.md §2).

Rules:
- An assignor is named, and speaks a range of versions [minimum_version,
  maximum_version]; a member runs one `version` of it and publishes `metadata()` for it.
  The coordinator asks a member whose range covers every member's version (000:L250-260),
  so `assign` must read every version in its range.
- `assign` is a pure function of the `GroupSpec` the coordinator prepared: the members
  (subscribed topic ids, version, reason, metadata, current target) and the subscribed
  topics' partition counts. It returns every partition of those topics to exactly one
  subscriber (the coordinator refuses anything else with INVALID_ASSIGNMENT), plus the
  per-member metadata the member's `on_assignment` will receive.
- A failure is reported, not raised to the coordinator as a bad assignment: `assign`
  raises `AssignorError(code)`, and the library installs Error=code so the group still
  advances (000:L274-276).
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

Partitions = Mapping[uuid.UUID, frozenset[int]]


class AssignorError(Exception):
    """`assign` could not compute an assignment; `code` (1-127) reaches every member."""

    def __init__(self, code: int, message: str = "") -> None:
        if not 1 <= code <= 127:
            raise ValueError(f"an assignor error code is an int8 in 1..127, not {code}")
        super().__init__(message or f"assignor error {code}")
        self.code = code


@dataclass(frozen=True, slots=True)
class MemberSpec:
    member_id: str
    subscriptions: frozenset[uuid.UUID]
    version: int
    metadata: bytes = b""
    reason: int = 0
    current: Partitions = field(default_factory=dict)   # the member's current target (stickiness)
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    group_epoch: int
    members: Mapping[str, MemberSpec]
    partitions: Mapping[uuid.UUID, int]                  # subscribed topic id -> partition count
    topic_names: Mapping[uuid.UUID, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    partitions: Partitions
    metadata_version: int = -1
    metadata: bytes = b""


class PartitionAssignor(Protocol):
    name: str
    minimum_version: int
    maximum_version: int
    version: int

    def metadata(self) -> bytes:
        """This member's metadata for its `version` (sent with ClientAssignors)."""
        ...

    def assign(self, group: GroupSpec) -> Mapping[str, MemberAssignment]:
        """The group's assignment; raises AssignorError to report a failure."""
        ...

    def on_assignment(self, partitions: Partitions, metadata_version: int, metadata: bytes | None,
                      error: int) -> None:
        """The member reached a new assignment epoch (its partitions, the assigner's
        metadata for it, and the assigner's error, 0 if none)."""
        ...
