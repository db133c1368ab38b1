"""Taking a broker's `__consumer_offsets` segment files, as an operator copies them off a
production broker: every `__consumer_offsets-<n>/*.log` under the node's data directory.

The broker keeps running (kcoord is served in front of it afterwards), and its log cleaner
may replace segments at any time (it writes `.cleaned`, swaps, deletes the old file). So a copy
counts only when two copies in a row are byte-identical and no segment was replaced between
them; before copying, the cleaner is given the time to compact (its checkpoint names the
partitions it has cleaned).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from support.wait import wait_until

TOPIC = "__consumer_offsets"


def data_dir(cluster) -> Path:
    return cluster.nodes[0].directory / "data"


def cleaned_partitions(cluster) -> dict[int, int]:
    """partition -> offset up to which Kafka's log cleaner has compacted it."""
    path = data_dir(cluster) / "cleaner-offset-checkpoint"
    out = {}
    if path.exists():
        for line in path.read_text().splitlines()[2:]:
            topic, partition, offset = line.split()
            if topic == TOPIC:
                out[int(partition)] = int(offset)
    return out


def segments(directory: Path) -> dict[str, bytes]:
    """relative path -> bytes of every offsets-topic segment under `directory`."""
    out = {}
    for d in sorted(directory.glob(f"{TOPIC}-*")):
        for seg in sorted(d.glob("*.log")):
            try:
                out[f"{d.name}/{seg.name}"] = seg.read_bytes()
            except FileNotFoundError:       # the cleaner swapped it out while we listed
                return {}
    return out


def copy_when_quiet(cluster, into: Path, timeout: float = 30.0) -> dict[str, bytes]:
    """Copy once the cleaner has compacted something and two reads in a row agree."""
    wait_until(lambda: any(cleaned_partitions(cluster).values()), timeout, 0.2,
               "Kafka's log cleaner compacting a __consumer_offsets partition")
    last: list[dict] = [{}]

    def stable() -> dict | None:
        now = segments(data_dir(cluster))
        same = bool(now) and now == last[0]
        last[0] = now
        return now if same else None

    files = wait_until(stable, timeout, 0.5, "the offsets segments unchanged between two reads")
    for name, data in files.items():
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        (into / name).write_bytes(data)
    return files


def copy_all(src: Path, into: Path) -> None:
    for d in sorted(src.glob(f"{TOPIC}-*")):
        for seg in sorted(d.glob("*.log")):
            (into / d.name).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(seg, into / d.name / seg.name)
