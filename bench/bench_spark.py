"""Throughput of the PySpark pipeline (ops/spark/job.py) for 1 and 2 executor cores.

    python bench/bench_spark.py [--records 5000000] [--dir DIR] [--cores 1,2]

Generates (or reuses) a log of at least --records records as segment files over 8
offsets-topic partitions, then runs the job once per core count, each in its own process
with master local[N] (a Spark session cannot change its master). Reported: records/s of
the job itself (decode + replay + the four Parquet tables, from the first action to the
last write; session start-up of ~9 s excluded), the process wall time, and records per
CPU second of the Python executors' decode + replay (a figure that other load on a
shared machine does not distort, unlike the wall-clock rates).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ops.generator import GeneratorSpec, write_segments  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--dir", help="reuse (or keep) the generated log here")
    ap.add_argument("--cores", default="1,2")
    args = ap.parse_args()
    directory = Path(args.dir or tempfile.mkdtemp(prefix="kcoord-bench-spark-"))
    if not any(directory.rglob("*.log")):
        t0 = time.monotonic()
        sink = write_segments(directory, GeneratorSpec(records=args.records, groups=2000,
                                                       partitions=args.partitions, topics=20,
                                                       topic_partitions=12, seed=1))
        print(f"generated {sink.records:,} records in {time.monotonic() - t0:.0f}s under {directory}")
    size = sum(f.stat().st_size for f in directory.rglob("*.log"))
    print(f"log: {size / 1e6:.0f} MB in {args.partitions} partitions")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    for cores in (int(c) for c in args.cores.split(",")):
        out = tempfile.mkdtemp(prefix=f"kcoord-bench-tables-{cores}-")
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "ops.spark.job", "--master", f"local[{cores}]",
                               "--out", out, str(directory)], cwd=ROOT, env=env, text=True,
                              capture_output=True)
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            raise SystemExit(f"the job failed with local[{cores}]")
        summary = json.loads(proc.stdout[proc.stdout.index("{"):])
        print(f"local[{cores}]: {summary['records']:,} records in {summary['seconds']:.1f}s = "
              f"{summary['records_per_second']:,} records/s (job), {wall:.1f}s wall with start-up; "
              f"{summary['records_per_executor_cpu_second']:,} records per executor CPU second; "
              f"rows {summary['rows']}")
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
