"""The ClientAssignors lists of a consumer group's members, aggregated (docs/design/client-assignors-spec.md).

Rules:
- Kept in step with the members by ConsumerGroup._index/_unindex, so by
  replay only: handlers never touch it, and a reload rebuilds it.
- It answers what client_assignment.select_assignor and the assigner's eligibility ask of
  every member's list, in O(names) instead of O(members): a 1,000-member group heartbeats
  without visiting every member (bench/bench_client_assignors.py).
- `select` must equal client_assignment.select_assignor over the same lists; the unit tests
  compare them.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


class AssignorIndex:
    __slots__ = ("listed", "names", "ranks", "versions")

    def __init__(self) -> None:
        self.listed = 0                           # members with a non-empty list
        self.names: Counter[str] = Counter()      # members listing each name
        self.ranks: Counter[str] = Counter()      # sum of each name's list positions
        self.versions: dict[str, Counter[int]] = {}   # each name's Version, one per member

    def __repr__(self) -> str:
        # By content: replay equivalence tests compare group state by repr.
        return (f"AssignorIndex(listed={self.listed}, names={dict(sorted(self.names.items()))}, "
                f"ranks={dict(sorted(self.ranks.items()))}, "
                f"versions={ {n: dict(sorted(v.items())) for n, v in sorted(self.versions.items())} })")

    def add(self, specs: Sequence[Any] | None, sign: int = 1) -> None:
        if not specs:
            return
        self.listed += sign
        for position, s in enumerate(specs):
            self.names[s.name] += sign
            self.ranks[s.name] += sign * position
            vs = self.versions.setdefault(s.name, Counter())
            vs[s.version] += sign
            if vs[s.version] <= 0:
                del vs[s.version]
            if self.names[s.name] <= 0:
                del self.names[s.name], self.ranks[s.name], self.versions[s.name]

    def remove(self, specs: Sequence[Any] | None) -> None:
        self.add(specs, -1)

    def select(self, members: int) -> str | None:
        """The group's client assignor when it has `members` members, or None (server mode)."""
        if not members or self.listed != members:
            return None
        common = [n for n, c in self.names.items() if c == members]
        return min(common, key=lambda n: (self.ranks[n], n)) if common else None

    def covers_all(self, spec: Any) -> bool:
        """Whether `spec`'s [Min, Max] contains every member's Version of its name (000:L260)."""
        vs = self.versions.get(spec.name)
        return not vs or (spec.covers(min(vs)) and spec.covers(max(vs)))

    @contextmanager
    def overlaid(self, old: Sequence[Any] | None, new: Sequence[Any] | None) -> Iterator[AssignorIndex]:
        """The index with one member's list `old` replaced by `new` (a joiner: old None),
        restored on exit: a heartbeat asks about the group as its update would leave it."""
        if old is new:
            yield self
            return
        self.remove(old)
        self.add(new)
        try:
            yield self
        finally:
            self.remove(new)
            self.add(old)
