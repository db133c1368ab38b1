"""What every reader of an offsets log yields, and how damage is reported.

A reader yields `LogBatch`es: one record batch of one partition of the offsets topic,
as Kafka stores it (data or a COMMIT/ABORT control batch). Segment files, dump files
and a live topic all come down to this, so dump, replay, downgrade-check, load and
the Spark job share one path from bytes to records.

Damage (bad CRC, truncation, a record that does not decode) is never skipped
silently: without `skip_corrupt` the reader raises `OffsetsLogError` naming the
file (or topic partition) and the byte position; with it, the problem is recorded in
`Problems` and reading resumes at the next good batch.
"""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from records.batch import RecordBatch

DUMP_SUFFIXES = (".jsonl", ".json", ".avro")
SEGMENT_SUFFIX = ".log"
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


@dataclass(slots=True)
class LogBatch:
    source: str           # file path, or "topic-partition" for a live topic
    partition: int        # partition of the offsets topic
    batch: RecordBatch    # .records: objects with .offset .timestamp .key .value


class OffsetsLogError(Exception):
    """Input that cannot be read correctly; `position` is a byte offset in `source`."""

    def __init__(self, source: str, position: int | None, reason: str,
                 offset: int | None = None) -> None:
        where = source
        if position is not None and position >= 0:
            where += f" at byte {position}"
        if offset is not None and offset >= 0:
            where += f" (log offset {offset})"
        super().__init__(f"{where}: {reason}")
        self.source, self.position, self.reason, self.offset = source, position, reason, offset


@dataclass(slots=True)
class Problem:
    source: str
    position: int | None
    offset: int | None
    reason: str
    skipped: str          # what was skipped: "batch", "bytes", "record", "line"

    def __str__(self) -> str:
        return str(OffsetsLogError(self.source, self.position, f"{self.reason} "
                                   f"(skipped: {self.skipped})", self.offset))

    def as_dict(self) -> dict:
        return {"source": self.source, "position": self.position, "offset": self.offset,
                "reason": self.reason, "skipped": self.skipped}


@dataclass
class Problems:
    """Damage met while reading. `skip` False turns the first problem into an error."""

    skip: bool = False
    items: list[Problem] = field(default_factory=list)
    echo: bool = True     # print each problem on stderr as it is found

    def report(self, source: str, position: int | None, reason: str, *, offset: int | None = None,
               skipped: str = "batch") -> None:
        if not self.skip:
            raise OffsetsLogError(source, position, reason, offset)
        problem = Problem(source, position, offset, reason, skipped)
        self.items.append(problem)
        if self.echo:
            print(f"kcoord offsets: warning: {problem}", file=sys.stderr, flush=True)

    def __bool__(self) -> bool:
        return bool(self.items)


class Progress:
    """A progress bar on stderr (tqdm when installed and stderr is a terminal or forced)."""

    def __init__(self, total: int | None, unit: str, enabled: bool, desc: str = "reading") -> None:
        self._bar = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:  # pragma: no cover - tqdm is a declared dependency
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=total, unit=unit, unit_scale=True, desc=desc,
                                 file=sys.stderr, mininterval=0.5, leave=False)

    def update(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def set_total(self, total: int) -> None:
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def progress_wanted(flag: bool | None) -> bool:
    """--progress / --no-progress; by default only when stderr is a terminal."""
    return sys.stderr.isatty() if flag is None else flag


# ----------------------------------------------------------------- discovery
def partition_of_path(path: Path) -> int | None:
    """Kafka keeps partition N of topic T in a directory named `T-N`."""
    m = _PARTITION_DIR.match(path.parent.name)
    return int(m.group("partition")) if m else None


def _segment_sort_key(path: Path) -> tuple:
    # Segment files are named by their base offset (20 digits).
    stem = path.stem
    return (str(path.parent), int(stem) if stem.isdigit() else -1, path.name)


def discover(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Expand directories into the segment and dump files they hold, each partition's
    segments in base-offset order. Kafka's index and checkpoint files are ignored."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files = [f for f in p.rglob("*") if f.is_file()
                     and (f.suffix == SEGMENT_SUFFIX or f.suffix in DUMP_SUFFIXES)]
            found.extend(sorted(files, key=_segment_sort_key))
        elif p.exists():
            found.append(p)
        else:
            raise OffsetsLogError(str(p), None, "no such file or directory")
    return found


def is_dump(path: Path) -> bool:
    return path.suffix in DUMP_SUFFIXES


def total_bytes(paths: Iterable[Path]) -> int:
    return sum(p.stat().st_size for p in paths)
