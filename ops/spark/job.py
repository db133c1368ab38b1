"""PySpark pipeline: offsets logs -> Parquet tables, decoded and replayed on the executors.

    kcoord offsets spark DATA_DIR --out TABLES_DIR              # local[*]
    spark-submit ops/spark/job.py --out TABLES_DIR DATA_DIR     # any cluster, unchanged

Input: segment files (`<topic>-<n>/<base offset>.log`) or dump files, partitioned by
offsets-topic partition. One Spark task per partition reads its files in order with the
same `records/` codec and replays them with the coordinator's own Replayer
(`ops.tables.partition_tables`), so a group's state never needs a shuffle: Kafka already
put all of a group's records in one partition. Output tables (Parquet, one directory
each): final_offsets, membership_history, record_type_counts, commit_rate
(columns: `ops.tables.COLUMNS`).

Executors need this package and its dependencies (aiokafka, kio, fastavro, orjson...)
installed; on a non-local master the job also ships the code with `addPyFile`.
There is no spark-avro or spark-kafka here: fastavro and `records/` run inside
mapPartitions.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import zipfile
from collections import defaultdict
from pathlib import Path

if __name__ == "__main__":   # spark-submit runs this file as a script
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ops.logsource import discover, is_dump, partition_of_path  # noqa: E402
from ops.tables import COLUMNS  # noqa: E402

TABLES = list(COLUMNS)


def _dump_partition(path: Path) -> int:
    from ops.dumpfile import read_dump
    from ops.logsource import Problems
    for lb in read_dump(path, Problems(echo=False)):
        return lb.partition
    return 0


def plan_tasks(paths: list[str]) -> list[tuple[int, list[str]]]:
    """(offsets-topic partition, its files in log order). A dump file counts for the
    partition of its first entry: write one dump per partition (dump --per-partition)."""
    by_partition: dict[int, list[str]] = defaultdict(list)
    for f in discover(paths):
        p = _dump_partition(f) if is_dump(f) else partition_of_path(f)
        by_partition[0 if p is None else p].append(str(f))
    return sorted(by_partition.items())


def run_partition_tasks(tasks, skip_corrupt: bool = False, topic_names: dict | None = None):
    """Executor side: every table row of every task, tagged with its table name."""
    import logging

    from ops.logfiles import iter_files
    from ops.logsource import Problems
    from ops.tables import partition_tables
    # Unknown record types are counted in record_type_counts; the replayer's WARN is noise.
    logging.getLogger("kcoord.replay").setLevel(logging.ERROR)
    for partition, files in tasks:
        problems = Problems(skip=skip_corrupt, echo=False)
        started = time.process_time()
        tables = partition_tables(iter_files([Path(f) for f in files], problems,
                                             default_partition=partition), problems, topic_names)
        # CPU seconds of this task's decode + replay: a figure other load on the machine
        # does not distort (wall time does).
        tables["_stats"] = [(*row, time.process_time() - started) for row in tables["_stats"]]
        for name, rows in tables.items():
            for row in rows:
                yield name, row
        for p in problems.items:
            yield "_problems", (p.source, p.position, p.offset, p.reason, p.skipped)


def _schema(table: str):
    from pyspark.sql import types as T
    kinds = {"string": T.StringType(), "int": T.IntegerType(), "long": T.LongType()}
    return T.StructType([T.StructField(name, kinds[kind], True) for name, kind in COLUMNS[table]])


def _code_zip() -> str:
    root = Path(__file__).resolve().parents[2]
    path = os.path.join(tempfile.mkdtemp(prefix="kcoord-spark-"), "kcoord.zip")
    with zipfile.ZipFile(path, "w") as z:
        for package in ("ops", "records", "coordinator", "migration"):
            for f in (root / package).rglob("*"):
                if f.is_file() and "__pycache__" not in f.parts:
                    z.write(f, f.relative_to(root))
    return path


def session(master: str | None = None, app_name: str = "kcoord-offsets"):
    # Executors must run this interpreter (its venv has fastavro, aiokafka, kio...).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.appName(app_name).config("spark.ui.enabled", "false")
    if master is not None:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:   # not under spark-submit
        builder = builder.master("local[*]")
    return builder.getOrCreate()


def run_job(paths: list[str], out: str, *, master: str | None = None, spark=None,
            skip_corrupt: bool = False, topic_names: dict | None = None) -> dict:
    """`topic_names`: topic id -> name for the assignments (e.g. `--topics-from` a cluster)."""
    from pyspark import StorageLevel
    spark = spark or session(master)
    sc = spark.sparkContext
    if not sc.master.startswith("local"):
        sc.addPyFile(_code_zip())
    tasks = plan_tasks(paths)
    started = time.monotonic()
    rows = sc.parallelize(tasks, max(1, len(tasks))).mapPartitions(
        lambda it: run_partition_tasks(it, skip_corrupt, topic_names))
    rows.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        counts = {}
        for table in TABLES:
            df = spark.createDataFrame(rows.filter(lambda r, t=table: r[0] == t).map(lambda r: r[1]),
                                       _schema(table))
            path = os.path.join(out, table)
            df.write.mode("overwrite").parquet(path)
            # Counting the written files reads Parquet footers; df.count() would convert
            # every row from Python again.
            counts[table] = spark.read.parquet(path).count()
        stats = rows.filter(lambda r: r[0] == "_stats").map(lambda r: r[1]).collect()
        problems = rows.filter(lambda r: r[0] == "_problems").map(lambda r: r[1]).collect()
    finally:
        rows.unpersist()
    seconds = time.monotonic() - started
    records = sum(s[0] for s in stats)
    return {"master": sc.master, "default_parallelism": sc.defaultParallelism,
            "partitions": [p for p, _ in tasks], "records": records,
            "batches": sum(s[1] for s in stats), "seconds": round(seconds, 3),
            "records_per_second": round(records / seconds) if seconds else None,
            "executor_cpu_seconds": round(sum(s[3] for s in stats), 3),
            "records_per_executor_cpu_second": round(records / max(sum(s[3] for s in stats), 1e-9)),
            "rows": counts, "out": out,
            "problems": [dict(zip(("source", "position", "offset", "reason", "skipped"), p))
                         for p in problems]}


def topic_names_from(bootstrap: str | None) -> dict | None:
    if not bootstrap:
        return None
    from ops.live import cluster_image
    return {t.topic_id: t.name for t in cluster_image(bootstrap).topics_by_id.values()}


def main(argv: list[str] | None = None) -> int:
    import json
    ap = argparse.ArgumentParser(prog="kcoord-offsets-spark", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--master", default=None)
    ap.add_argument("--skip-corrupt", action="store_true")
    ap.add_argument("--topics-from", metavar="HOST:PORT", help="name topic ids from this cluster")
    args = ap.parse_args(argv)
    print(json.dumps(run_job(args.paths, args.out, master=args.master,
                             skip_corrupt=args.skip_corrupt,
                             topic_names=topic_names_from(args.topics_from)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
