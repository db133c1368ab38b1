"""A generator of realistic `__consumer_offsets` logs (tests and benchmarks make their
data with it; no binary fixtures live in the repository).

    batches = generate(GeneratorSpec(partitions=4, groups=40, records=20_000))
    write_segments(Path("out"), GeneratorSpec(...))       # Kafka segment files
    # topic format: ops.produce_log.produce(bootstrap, topic, batches)

See `scenario.py` for what the log holds.
"""
from __future__ import annotations

from pathlib import Path

from ops.generator.scenario import GeneratorSpec, Scenario

SEGMENT_TOPIC = "__consumer_offsets"


def topics(spec: GeneratorSpec) -> list:
    """The topics (name, id, partition count) a spec's groups consume."""
    return Scenario(spec, lambda p, b, n: None).topics


def image(spec: GeneratorSpec):
    """A metadata image of those topics, as a cluster holding them would publish."""
    from coordinator.group.image import MetadataImage, TopicImage
    return MetadataImage.of(TopicImage(t.topic_id, t.name, t.partitions) for t in topics(spec))


def generate(spec: GeneratorSpec) -> dict[int, list[bytes]]:
    """partition -> its record batches (bytes), in log order."""
    out: dict[int, list[bytes]] = {p: [] for p in range(spec.partitions)}
    Scenario(spec, lambda p, batch, n: out[p].append(batch)).run()
    return out


class SegmentSink:
    """Writes `<dir>/<topic>-<p>/<base offset>.log` files, rolling at `segment_bytes` as
    a broker rolls its segments."""

    def __init__(self, directory: Path, partitions: int, topic: str = SEGMENT_TOPIC,
                 segment_bytes: int = 256 * 1024 * 1024) -> None:
        self.directory, self.topic, self.segment_bytes = Path(directory), topic, segment_bytes
        self._files: dict[int, object] = {}
        self._sizes = [0] * partitions
        self._next_offset = [0] * partitions
        self.records = 0
        self.paths: list[Path] = []

    def __call__(self, partition: int, batch: bytes, records: int) -> None:
        f = self._files.get(partition)
        if f is None or self._sizes[partition] + len(batch) > self.segment_bytes:
            if f is not None:
                f.close()
            d = self.directory / f"{self.topic}-{partition}"
            d.mkdir(parents=True, exist_ok=True)
            path = d / f"{self._next_offset[partition]:020d}.log"
            self.paths.append(path)
            f = self._files[partition] = open(path, "wb")
            self._sizes[partition] = 0
        f.write(batch)
        self._sizes[partition] += len(batch)
        self._next_offset[partition] += records
        self.records += records

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


def write_segments(directory: Path, spec: GeneratorSpec,
                   segment_bytes: int = 256 * 1024 * 1024) -> SegmentSink:
    sink = SegmentSink(directory, spec.partitions, segment_bytes=segment_bytes)
    try:
        Scenario(spec, sink).run()
    finally:
        sink.close()
    return sink


__all__ = ["GeneratorSpec", "generate", "topics", "image", "write_segments", "SegmentSink", "SEGMENT_TOPIC"]
