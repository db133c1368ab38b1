"""What a Produce above max_decoded_request_bytes costs kcoord's event loop at the bound
(coordinator/gateway/produce_check.py: read within MAX_NAMED_PARTITIONS topics and
partitions, then walked, checked and, when a batch is refused or the state topic named,
decoded), next to the largest walked frame (max_decoded_request_bytes of empty partitions).

    .venv/bin/python bench/bench_large_produce.py [--partitions 99990] [--repeat 3]

In process, no broker: each step timed alone (process CPU, best of ``--repeat``) on
Produce v9 and v12 frames of one topic, two topics, and one partition per topic (half as
many topics), each partition one one-record batch. Benchmarks are not tests: nothing here
asserts a speed.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from coordinator.config import CoordinatorConfig  # noqa: E402  (after the path)
from coordinator.gateway.produce_check import MAX_NAMED_PARTITIONS, RecordChecks, record_spans, refused_partitions  # noqa: E402
from coordinator.protocol.apis import PRODUCE, request_class  # noqa: E402
from coordinator.protocol.checked import struct_step  # noqa: E402
from coordinator.protocol.codec import decode_body  # noqa: E402
from unit.gateway.test_produce_check import batch, produce  # noqa: E402

CHECKS = RecordChecks(max_message_bytes=2**31 - 1, verify_crc=True)


def best(fn: Callable[[], object], repeat: int) -> float:
    """Milliseconds of process CPU, the best of ``repeat``."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times) * 1000


def row(version: int, topics: list, repeat: int) -> str:  # type: ignore[type-arg]
    """One shape's figures, formatted as a table row (without its name)."""
    cls = request_class(PRODUCE, version)
    walk = struct_step(cls)
    data, offset = produce(version, topics)
    read = best(lambda: sum(1 for _ in record_spans(data, offset, version, MAX_NAMED_PARTITIONS)), repeat)
    walked = best(lambda: walk(data, offset, len(data)), repeat)
    checks = best(lambda: refused_partitions(data, offset, version, CHECKS, walked=False), repeat)
    decode = best(lambda: decode_body(cls, data, offset), 1)
    return f"{len(data) / 1e6:.1f} MB | {read:.0f} ms | {walked:.0f} ms | {checks:.0f} ms | {decode:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=MAX_NAMED_PARTITIONS - 10,
                        help="topics and partitions together stay within MAX_NAMED_PARTITIONS")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n, one = args.partitions, batch(b"v")
    shapes = {"one topic": [("t", [(i, one) for i in range(n)])],
              "two topics": [("t", [(i, one) for i in range(n // 2)]), ("u", [(i, one) for i in range(n // 2)])],
              f"{n // 2:,} topics": [(f"t{i}", [(0, one)]) for i in range(n // 2)]}
    print("shape | frame | read within the bound | generic walk | record checks (the read included) | decode")
    for version in (9, 12):
        for shape, topics in shapes.items():
            print(f"v{version} {shape} | {row(version, topics, args.repeat)}", flush=True)
    limit = CoordinatorConfig().max_decoded_request_bytes
    empty = (limit - 64) // 8                     # v8: index + null records, 8 bytes a partition
    data, offset = produce(8, [("t", [(i, None) for i in range(empty)])])
    walk = struct_step(request_class(PRODUCE, 8))
    walked = best(lambda: walk(data, offset, len(data)), args.repeat)
    checks = best(lambda: refused_partitions(data, offset, 8, CHECKS), args.repeat)
    print(f"v8 walked, {empty:,} empty partitions | {len(data) / 1e6:.1f} MB | - | {walked:.0f} ms "
          f"| {checks:.0f} ms | -")


if __name__ == "__main__":
    main()
