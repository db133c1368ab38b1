"""The PySpark pipeline on a small generated log: its Parquet tables equal the
single-process replay (segment input and dump input)."""
from __future__ import annotations

from collections import Counter

import pytest

from ops.describe import replay_model
from ops.generator import GeneratorSpec, write_segments
from ops.logfiles import iter_files
from ops.logsource import Problems, discover
from ops.materialise import OffsetsReplay
from ops.tables import COLUMNS, partition_tables

pyspark = pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def spark():
    from ops.spark.job import session
    s = session("local[2]", app_name="kcoord-ops-test")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


def read_table(spark, path) -> Counter:
    return Counter(tuple(row) for row in spark.read.parquet(str(path)).collect())


def test_spark_tables_equal_the_single_process_replay(spark, tmp_path):
    from coordinator.cli import build_parser
    from ops.spark.job import run_job

    log = tmp_path / "log"
    write_segments(log, GeneratorSpec(records=8000, groups=24, partitions=3, seed=41))
    single = partition_tables(iter_files(discover([log]), Problems()))
    model = replay_model(OffsetsReplay().feed_all(iter_files(discover([log]), Problems())))

    summary = run_job([str(log)], str(tmp_path / "tables"), spark=spark)
    assert summary["partitions"] == [0, 1, 2] and summary["records"] == model["summary"]["records"]
    assert not summary["problems"]
    for table in COLUMNS:
        got = read_table(spark, tmp_path / "tables" / table)
        assert got == Counter(single[table]), table
        assert got, table
    offsets = {(r[0], r[1], r[2]): r[3] for r in read_table(spark, tmp_path / "tables" / "final_offsets")}
    assert offsets == {(g["group"], o["topic"], o["partition"]): o["offset"]
                       for g in model["groups"] for o in g["offsets"]}
    types = Counter()
    for group, _, rtype, n, _ in read_table(spark, tmp_path / "tables" / "record_type_counts"):
        types[rtype] += n
    assert dict(types) == model["summary"]["by_type"]

    # The same log as dump files, one per partition: same tables.
    dumps = tmp_path / "dumps"
    args = build_parser().parse_args(["offsets", "dump", str(log), "--per-partition", "-o", str(dumps)])
    assert args.func(args) == 0
    assert run_job([str(dumps)], str(tmp_path / "from-dump"), spark=spark)["partitions"] == [0, 1, 2]
    for table in ("final_offsets", "record_type_counts", "commit_rate"):
        assert read_table(spark, tmp_path / "from-dump" / table) == Counter(single[table]), table
