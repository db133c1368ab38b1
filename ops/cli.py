"""`kcoord offsets ...`: offline tools for `__consumer_offsets`-format logs.

    kcoord offsets dump      SOURCE... [--format jsonl|avro] [-o FILE]
    kcoord offsets show      SOURCE... [--partition P] [--offset O] [--count N] [--json]
    kcoord offsets replay    SOURCE... [--json] [--group G] [--html FILE]
    kcoord offsets downgrade-check SOURCE... [--json] [--write-tombstones FILE [--apply]]
    kcoord offsets load      SOURCE... --to HOST:PORT [--state-topic T] [--state-partitions N]
    kcoord offsets generate  (--out DIR | --dump FILE | --bootstrap HOST:PORT --topic T) [...]
    kcoord offsets spark     SOURCE... --out DIR [--master local[*]]

SOURCE: segment files (`*.log`, partition from the `<topic>-<n>` directory), directories
of them, dump files (`.jsonl`, `.avro`), or a live topic with `--bootstrap` and `--topic`.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Iterator

import orjson

from ops.logfiles import iter_files
from ops.logsource import (
    LogBatch,
    OffsetsLogError,
    Problems,
    Progress,
    discover,
    progress_wanted,
    total_bytes,
)


def register(subparsers) -> None:
    p = subparsers.add_parser("offsets", help="dump, replay, check, load and generate offsets logs",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="offsets_command", required=True)

    d = sub.add_parser("dump", help="every record as JSON lines or Avro")
    _source_args(d)
    d.add_argument("--format", choices=("jsonl", "avro"), default="jsonl")
    d.add_argument("-o", "--output", default="-", help="output file (default stdout)")
    d.add_argument("--per-partition", action="store_true",
                   help="-o is a directory: one dump file per offsets-topic partition "
                        "(partition-<n>.jsonl|avro), the input the Spark job parallelises")
    d.set_defaults(func=cmd_dump)

    sh = sub.add_parser("show", help="records at chosen offsets: raw key/value hex, decoded or the "
                                     "error that stops them from loading")
    _source_args(sh)
    sh.add_argument("--offset", type=int, default=None, help="first offset to show (default: the start)")
    sh.add_argument("--count", type=int, default=None,
                    help="records to show (default 1 with --offset, else all)")
    sh.add_argument("--json", action="store_true", help="one JSON object per record")
    # A diagnosis tool reads past damage: it reports it and goes on.
    sh.set_defaults(func=cmd_show, skip_corrupt=True)

    r = sub.add_parser("replay", help="materialise groups and offsets, like kafka-consumer-groups "
                                      "--describe")
    _source_args(r)
    r.add_argument("--json", action="store_true", help="JSON instead of the text layout")
    r.add_argument("--group", action="append", help="only this group (repeatable)")
    r.add_argument("--html", metavar="FILE", help="also write an HTML report with plots")
    r.add_argument("--topics-from", metavar="HOST:PORT",
                   help="name topic ids with this cluster's metadata")
    r.set_defaults(func=cmd_replay)

    c = sub.add_parser("downgrade-check", help="what a classic-only coordinator would lose "
                                               "(KIP-915)")
    _source_args(c)
    c.add_argument("--json", action="store_true")
    c.add_argument("--write-tombstones", metavar="FILE",
                   help="write the conversion / clean-up tombstones (a JSON-lines dump) for review")
    c.add_argument("--apply", action="store_true",
                   help="also produce those tombstones to --apply-topic on --apply-bootstrap")
    c.add_argument("--apply-bootstrap", metavar="HOST:PORT")
    c.add_argument("--apply-topic", metavar="TOPIC")
    c.add_argument("--fail-on-loss", action="store_true", help="exit 3 if any state would be lost")
    c.set_defaults(func=cmd_downgrade_check)

    ld = sub.add_parser("load", help="copy a log into kcoord's state topic")
    _source_args(ld)
    ld.add_argument("--to", required=True, metavar="HOST:PORT", help="upstream cluster of kcoord")
    ld.add_argument("--state-topic", default="__kcoord_offsets")
    ld.add_argument("--state-partitions", type=int, default=50)
    ld.add_argument("--allow-non-empty", action="store_true")
    ld.set_defaults(func=cmd_load)

    g = sub.add_parser("generate", help="write a realistic generated offsets log")
    out = g.add_mutually_exclusive_group(required=True)
    out.add_argument("--out", metavar="DIR", help="segment files <DIR>/__consumer_offsets-<n>/*.log")
    out.add_argument("--dump", metavar="FILE", help="a JSON-lines dump")
    out.add_argument("--topic", help="produce into this topic (needs --bootstrap)")
    g.add_argument("--bootstrap", metavar="HOST:PORT")
    g.add_argument("--partitions", type=int, default=4)
    g.add_argument("--groups", type=int, default=40)
    g.add_argument("--records", type=int, default=20_000)
    g.add_argument("--topics", type=int, default=6)
    g.add_argument("--topic-partitions", type=int, default=6)
    g.add_argument("--seed", type=int, default=7)
    g.add_argument("--compression", choices=("none", "gzip", "snappy", "lz4", "zstd"), default="none")
    g.add_argument("--segment-bytes", type=int, default=256 * 1024 * 1024)
    g.add_argument("--no-unknown-types", action="store_true")
    g.set_defaults(func=cmd_generate)

    s = sub.add_parser("spark", help="run the PySpark pipeline (Parquet tables)")
    s.add_argument("paths", nargs="+", help="segment or dump files / directories")
    s.add_argument("--out", required=True, help="output directory for the Parquet tables")
    s.add_argument("--master", default=None, help="Spark master (default local[*])")
    s.add_argument("--skip-corrupt", action="store_true")
    s.add_argument("--topics-from", metavar="HOST:PORT",
                   help="name topic ids in assignments with this cluster's metadata")
    s.set_defaults(func=cmd_spark)


def _source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", help="segment files, dump files or directories")
    p.add_argument("--bootstrap", metavar="HOST:PORT", help="read a live topic from this cluster")
    p.add_argument("--topic", help="the live topic (with --bootstrap)")
    p.add_argument("--partition", type=int, default=None,
                   help="offsets-topic partition of segment files outside a <topic>-<n> directory")
    p.add_argument("--skip-corrupt", action="store_true",
                   help="report damaged batches and continue at the next good one")
    p.add_argument("--progress", dest="progress", action="store_true", default=None)
    p.add_argument("--no-progress", dest="progress", action="store_false")


class Source:
    """The batches of the command's input, with a progress bar on stderr."""

    def __init__(self, args: argparse.Namespace, problems: Problems) -> None:
        if bool(args.bootstrap) != bool(args.topic) and not args.paths:
            raise OffsetsLogError("arguments", None, "a live topic needs both --bootstrap and --topic")
        if not args.paths and not args.topic:
            raise OffsetsLogError("arguments", None, "no input: give files, directories or "
                                                     "--bootstrap/--topic")
        self.args, self.problems = args, problems

    def __iter__(self) -> Iterator[LogBatch]:
        args = self.args
        if args.paths:
            files = discover(args.paths)
            progress = Progress(total_bytes(files), "B", progress_wanted(args.progress))
            try:
                yield from iter_files(files, self.problems, default_partition=args.partition,
                                      progress=progress)
            finally:
                progress.close()
        if args.topic and args.bootstrap:
            from ops.live import TopicReader
            progress = Progress(None, "rec", progress_wanted(args.progress))
            # `show` reads one partition from an offset; the other commands read everything.
            selective = getattr(args, "offsets_command", None) == "show"
            partitions = [args.partition] if selective and args.partition is not None else None
            start = (args.offset or 0) if selective else 0
            try:
                yield from TopicReader(args.bootstrap, args.topic, partitions=partitions,
                                       start_offset=start).read(self.problems, progress)
            finally:
                progress.close()


def _run(fn):
    def wrapped(args: argparse.Namespace) -> int:
        # Unknown types are reported in the summaries; the replayer's per-shard WARN is noise here.
        logging.getLogger("kcoord.replay").setLevel(logging.ERROR)
        try:
            return fn(args, Problems(skip=getattr(args, "skip_corrupt", False)))
        except OffsetsLogError as e:
            print(f"kcoord offsets: error: {e}", file=sys.stderr)
            if not getattr(args, "skip_corrupt", True):
                print("kcoord offsets: (use --skip-corrupt to report damage and continue)",
                      file=sys.stderr)
            return 2
    return wrapped


@_run
def cmd_dump(args, problems: Problems) -> int:
    from pathlib import Path

    from ops.dumpfile import DumpStats, DumpWriter, open_output
    if args.per_partition and args.output == "-":
        raise OffsetsLogError("arguments", None, "--per-partition needs -o DIRECTORY")
    writers: dict[int, tuple] = {}

    def writer_for(partition: int) -> DumpWriter:
        w = writers.get(partition if args.per_partition else -1)
        if w is None:
            if args.per_partition:
                Path(args.output).mkdir(parents=True, exist_ok=True)
                out = open(Path(args.output) / f"partition-{partition}.{args.format}", "wb")
            else:
                out = open_output(args.output)
            w = writers[partition if args.per_partition else -1] = (DumpWriter(out, args.format), out)
        return w[0]

    try:
        for lb in Source(args, problems):
            writer_for(lb.partition).write_batch(lb)
    finally:
        for writer, out in writers.values():
            writer.close()
            if out is not sys.stdout.buffer:
                out.close()
    total = DumpStats()
    for writer, _ in writers.values():
        s = writer.stats
        total.entries += s.entries
        total.by_type.update(s.by_type)
        total.tombstones += s.tombstones
        total.unknown_types.update(s.unknown_types)
        total.errors += s.errors
    stats = total.as_dict()
    stats["problems"] = [p.as_dict() for p in problems.items]
    print(orjson.dumps(stats).decode(), file=sys.stderr)
    return 0


@_run
def cmd_show(args, problems: Problems) -> int:
    from ops.show import describe, render_text, select
    count = args.count if args.count is not None else (1 if args.offset is not None else None)
    shown = 0
    for lb, r in select(Source(args, problems), args.partition, args.offset, count):
        d = describe(lb, r, args.topic)
        if args.json:
            sys.stdout.buffer.write(orjson.dumps(d) + b"\n")
        else:
            sys.stdout.write(render_text(d))
        shown += 1
    sys.stdout.flush()
    if not shown:
        where = f"partition {args.partition}" if args.partition is not None else "the input"
        print(f"kcoord offsets: no record in {where}"
              + (f" at or after offset {args.offset}" if args.offset is not None else ""), file=sys.stderr)
        return 1
    return 0


def replay_source(args, problems: Problems, **kwargs):
    from ops.materialise import OffsetsReplay
    return OffsetsReplay(problems, **kwargs).feed_all(Source(args, problems))


@_run
def cmd_replay(args, problems: Problems) -> int:
    from ops.describe import render_text, replay_model
    from ops.live import cluster_image
    from ops.report import ReportCollector, write_html
    collector = ReportCollector() if args.html else None
    replay = replay_source(args, problems, on_record=collector.observe if collector else None)
    image = cluster_image(args.topics_from) if args.topics_from else None
    model = replay_model(replay, args.group, image)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(model, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        sys.stdout.write(render_text(model))
    if collector is not None:
        write_html(args.html, model, collector)
        print(f"kcoord offsets: wrote {args.html}", file=sys.stderr)
    return 0


@_run
def cmd_downgrade_check(args, problems: Problems) -> int:
    from ops import downgrade
    from ops.materialise import OffsetsReplay
    if args.apply and not (args.write_tombstones and args.apply_bootstrap and args.apply_topic):
        raise OffsetsLogError("arguments", None, "--apply needs --write-tombstones FILE, "
                                                 "--apply-bootstrap and --apply-topic")
    new_records = downgrade.NewProtocolRecords()
    full = OffsetsReplay(problems, on_record=new_records.observe)
    classic = OffsetsReplay(problems, decode=downgrade.classic_only_decode)
    for lb in Source(args, problems):
        # Raw bytes first: the value-version scan also sees records kcoord's decoder refuses.
        new_records.value_versions.feed(lb)
        full.feed(lb)
        classic.feed(lb)
    report = downgrade.check(full, classic, new_records)
    if args.write_tombstones:
        items, skipped = downgrade.tombstones(full, new_records)
        _write_tombstones(args.write_tombstones, items)
        report["tombstones"] = {"file": args.write_tombstones, "count": len(items),
                                "groups_left_alone": skipped, "applied": False}
        if args.apply:
            from ops.produce_log import LogProducer
            producer = LogProducer(args.apply_bootstrap, args.apply_topic)
            try:
                for lb in downgrade.tombstone_batches(items, int(time.time() * 1000)):
                    producer.write(lb)
            finally:
                producer.close()
            report["tombstones"]["applied"] = True
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        from ops.report import render_downgrade_text
        sys.stdout.write(render_downgrade_text(report))
    return 3 if args.fail_on_loss and report["verdict"] != "no state lost" else 0


def _write_tombstones(path: str, items: list[dict]) -> None:
    from ops import downgrade
    from ops.dumpfile import DumpWriter, open_output
    out = open_output(path)
    writer = DumpWriter(out, "jsonl")
    try:
        for lb in downgrade.tombstone_batches(items, int(time.time() * 1000)):
            writer.write_batch(lb)
    finally:
        writer.close()
        if out is not sys.stdout.buffer:
            out.close()


@_run
def cmd_load(args, problems: Problems) -> int:
    from ops.load import load
    result = load(Source(args, problems), args.to, args.state_topic, args.state_partitions,
                  allow_non_empty=args.allow_non_empty)
    summary = result.as_dict()
    summary["problems"] = [p.as_dict() for p in problems.items]
    print(orjson.dumps(summary).decode())
    return 0


@_run
def cmd_generate(args, problems: Problems) -> int:
    from pathlib import Path

    from ops.generator import GeneratorSpec, generate, write_segments
    from records import batch as rb
    spec = GeneratorSpec(partitions=args.partitions, groups=args.groups, records=args.records,
                         topics=args.topics, topic_partitions=args.topic_partitions, seed=args.seed,
                         unknown_types=not args.no_unknown_types,
                         compression=getattr(rb, f"COMPRESSION_{args.compression.upper()}"))
    if args.out:
        sink = write_segments(Path(args.out), spec, args.segment_bytes)
        print(f"wrote {sink.records} records in {len(sink.paths)} segment files under {args.out}")
        return 0
    from ops.segment import iter_buffer
    batches = generate(spec)

    def log_batches():
        for p, bs in batches.items():
            buf = b"".join(bs)
            yield from iter_buffer(buf, len(buf), f"generated-{p}", p, problems)

    if args.dump:
        from ops.dumpfile import DumpWriter
        with open(args.dump, "wb") as f:
            writer = DumpWriter(f, "jsonl")
            for lb in log_batches():
                writer.write_batch(lb)
            writer.close()
        print(f"wrote {writer.stats.entries} entries to {args.dump}")
        return 0
    if not args.bootstrap:
        raise OffsetsLogError("arguments", None, "--topic needs --bootstrap")
    from ops.produce_log import produce
    out = produce(args.bootstrap, args.topic, log_batches(), args.partitions)
    print(f"produced {out.records} records and {out.markers} transaction markers to {args.topic}")
    return 0


@_run
def cmd_spark(args, problems: Problems) -> int:
    from ops.spark.job import run_job, topic_names_from
    summary = run_job(args.paths, args.out, master=args.master, skip_corrupt=args.skip_corrupt,
                      topic_names=topic_names_from(args.topics_from))
    print(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    return 0
