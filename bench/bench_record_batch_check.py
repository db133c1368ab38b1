"""CPU per MB of the Produce record-batch check (coordinator/protocol/record_batch_check.py).

    .venv/bin/python bench/bench_record_batch_check.py [--seconds S]

Batches a producer sends, built by aiokafka's encoder (records/batch.py): 16 records of
1 KB, 100 records of 1 KB (~100 KB), 1,000 records of 1 KB (~1 MB, under Kafka's default
max.message.bytes), each uncompressed and with every codec; plus 1 MB of 16-byte records
and 1 MB of empty records, the record walk's worst realistic and worst possible cases.
Values are JSON-like text with random fields, so they compress about as event payloads do.
For each batch it prints CPU time per batch and per MB of batch for:
- header: the check without CRC (O(1) per batch),
- crc32c: the check with its CRC-32C (the `crc32c` package, over a memoryview, no copy),
- google: the header check plus `google_crc32c.value` (it needs bytes: the slice is a copy),
- aiokafka: the header check plus aiokafka's `calc_crc32c` (what records/batch.py uses),
- walk: the check with CRC and the walk over the record length varints (uncompressed).
Figures are one core, CPython, best of 5 in process CPU time.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from aiokafka.record.util import calc_crc32c  # noqa: E402

from coordinator.protocol.record_batch_check import check_partition_records  # noqa: E402
from records.batch import build_batch  # noqa: E402

try:
    import google_crc32c
except ImportError:  # not a dependency: measured when installed
    google_crc32c = None

MAX = 1_048_588
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def payload(rng: random.Random, size: int) -> bytes:
    event = {"user": f"user-{rng.randrange(10**6)}", "session": f"{rng.getrandbits(64):016x}",
             "action": rng.choice(("view", "click", "purchase", "scroll")),
             "ts": 1_700_000_000_000 + rng.randrange(10**9), "items": []}
    text = json.dumps(event)
    while len(text) < size:
        event["items"].append({"sku": f"SKU-{rng.randrange(10**5):05d}", "qty": rng.randrange(1, 9),
                               "price": round(rng.uniform(1, 500), 2)})
        text = json.dumps(event)
    return text[:size].encode()


def batches() -> list[tuple[str, bytes]]:
    rng = random.Random(1)
    out = []
    for label, n, size in (("16 x 1 KB", 16, 1024), ("100 x 1 KB", 100, 1024), ("1000 x 1 KB", 1000, 1024)):
        records = [(f"key-{i}".encode(), payload(rng, size)) for i in range(n)]
        for codec, name in CODECS.items():
            out.append((f"{label} {name}", build_batch(records, timestamp_ms=1_700_000_000_000,
                                                       compression=codec)))
    tiny = [(None, payload(rng, 16)) for _ in range(40_000)]
    out.append(("40000 x 16 B none", build_batch(tiny, timestamp_ms=1_700_000_000_000)))
    empty = [(None, None)] * 110_000               # ~9 bytes a record: the walk's worst case
    out.append(("110000 x empty none", build_batch(empty, timestamp_ms=1_700_000_000_000)))
    return out


def cpu_per_call(fn: Callable[[], object], seconds: float) -> float:
    calls = 1
    while True:                                # calls enough for ~seconds/5 a round
        t0 = time.process_time()
        for _ in range(calls):
            fn()
        if time.process_time() - t0 > seconds / 5 or calls > 1 << 22:
            break
        calls *= 4
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - t0) / calls)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=0.5, help="CPU time per measurement")
    seconds = ap.parse_args().seconds

    def check(data: bytes, crc: bool, walk: bool = False) -> Callable[[], object]:
        view = memoryview(data)
        return lambda: check_partition_records(view, max_message_bytes=MAX, verify_crc=crc, walk_records=walk)

    def plus(data: bytes, crc: Callable[[bytes], int]) -> Callable[[], object]:
        view = memoryview(data)
        return lambda: (check_partition_records(view, max_message_bytes=MAX, verify_crc=False),
                        crc(data[21:]))

    modes: list[tuple[str, Callable[[bytes], Callable[[], object]]]] = [
        ("header", lambda d: check(d, False)),
        ("crc32c", lambda d: check(d, True)),
        ("google", lambda d: plus(d, google_crc32c.value)) if google_crc32c else ("google", lambda d: None),
        ("aiokafka", lambda d: plus(d, calc_crc32c)),
        ("walk", lambda d: check(d, True, True)),
    ]
    print(f"{'batch':<22}{'bytes':>10}  " + "".join(f"{name:>20}" for name, _ in modes))
    print(f"{'':<34}" + "".join(f"{'µs/batch  ms/MB':>20}" for _ in modes))
    for label, data in batches():
        assert check_partition_records(data, max_message_bytes=MAX, verify_crc=True,
                                       walk_records=True) is None, label
        cells = []
        for name, make in modes:
            fn = make(data)
            if fn is None or (name == "walk" and not label.endswith("none")):
                cells.append(f"{'-':>20}")
                continue
            per = cpu_per_call(fn, seconds)
            cells.append(f"{per * 1e6:>10.2f}{per * 1e3 / (len(data) / 2**20):>10.4f}")
        print(f"{label:<22}{len(data):>10}  " + "".join(cells), flush=True)
    print(f"\n{sys.executable} {' '.join(sys.argv)}; one core, best of 5, process CPU time")


if __name__ == "__main__":
    main()
