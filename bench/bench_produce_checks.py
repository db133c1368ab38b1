"""kcoord's CPU per MB produced through the gateway with the Produce record checks off, on
without the CRC, and on with the CRC-32C (coordinator/gateway/produce_check.py), in one run.

    KCOORD_TEST_PORTS=30000-30199 .venv/bin/python bench/bench_produce_checks.py [--runs 3]
        [--records 200000] [--record-bytes 1000] [--small-records 20000] [--small-record-bytes 100]

One Tansu broker and three ``kcoord serve`` processes in front of it, all running at once, so
they differ by their settings only:
- ``off``: ``--config produce.record.checks=false`` (batches forwarded unchecked);
- ``on``: ``--config produce.verify.crc=false`` (header, counts, sizes: O(1) per batch);
- ``on+crc``: ``--config produce.verify.crc=true`` (plus the CRC-32C over each batch).
Two loads, each through every kcoord in turn (the order flips every run): ``big``, records of
``--record-bytes`` with linger.ms=20 (batches near librdkafka's batch.size, the MB-heavy
case), and ``small``, records of ``--small-record-bytes`` with linger.ms=0 (a Produce per
few records: the per-request cost). Reported: kcoord's CPU (schedstat, all threads) per MB
of record values, per Produce request, and MB/s; medians of ``--runs``.

Benchmarks are not tests: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gateway_fetch import alternate, kcoords_on_tansu, produce_topic, start_kcoord  # noqa: E402
from loadgen import procs  # noqa: E402

TOPIC = "bench-produce-checks"
SETTINGS = {"off": ("produce.record.checks=false",), "on": ("produce.verify.crc=false",),
            "on+crc": ("produce.verify.crc=true",)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--small-records", type=int, default=20_000)
    parser.add_argument("--small-record-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    with kcoords_on_tansu() as (broker, kcoords):
        procs.run(procs.create_topic("127.0.0.1", broker.port, TOPIC, args.partitions))
        for name, config in SETTINGS.items():
            kcoords[name] = start_kcoord(broker, config)
            kc = kcoords[name][0]
            print(f"  {name}: kcoord pid {kc.pid} on 127.0.0.1:{kc.port} ({', '.join(config)})")
        loads: dict[str, tuple[str, Callable[[procs.Kcoord], dict[str, float]]]] = {
            "big": ("produce", lambda kc: produce_topic(f"127.0.0.1:{kc.port}", TOPIC, args.records,
                                                        args.record_bytes, linger_ms=20, kcoord_pid=kc.pid)),
            "small": ("produce", lambda kc: produce_topic(f"127.0.0.1:{kc.port}", TOPIC, args.small_records,
                                                          args.small_record_bytes, linger_ms=0, kcoord_pid=kc.pid)),
        }
        alternate(kcoords, loads, args.runs,
                  f"median of {args.runs}: kcoord CPU per MB produced, per Produce request; MB/s")


if __name__ == "__main__":
    main()
