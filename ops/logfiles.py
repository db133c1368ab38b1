"""Offsets-log files of either kind, read in order: dump files (`ops/dumpfile.py`: JSON
lines, JSON, Avro) and Kafka segment files (`ops/segment.py`), told apart by their suffix
(`logsource.is_dump`). The readers import `logsource` for what they yield; this dispatcher
sits above all three, so no reader imports another.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ops.dumpfile import read_dump
from ops.logsource import LogBatch, Problems, Progress, is_dump, partition_of_path
from ops.segment import read_segment


def iter_files(paths: list[Path], problems: Problems, *, default_partition: int | None = None,
               progress: Progress | None = None) -> Iterator[LogBatch]:
    """Every batch of every file, files in the given order."""
    for path in paths:
        if is_dump(path):
            yield from read_dump(path, problems, progress=progress)
        else:
            partition = partition_of_path(path)
            if partition is None:
                partition = default_partition if default_partition is not None else 0
            yield from read_segment(path, partition, problems, progress=progress)
