"""`kcoord rehearse upgrade|downgrade|streams`: registered into the `kcoord` command by coordinator/cli.py."""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "rehearse", help="rehearse a classic <-> consumer or classic <-> streams protocol switch with real clients",
        description="upgrade/downgrade: drive N real consumer processes of one group through a rolling protocol "
                    "switch while a producer writes; report losses, duplicates, committed offsets around each "
                    "group type change, and the group's type and epoch over time. streams: run N instances of a "
                    "real Kafka Streams application classic -> streams -> classic, offline (every instance stops "
                    "between phases); report the group's type and state per phase, offsets kept, reprocessing, "
                    "counts and tasks active twice. JSON + HTML report; exit code 1 when a check fails.")
    p.add_argument("direction", choices=("upgrade", "downgrade", "streams"),
                   help="upgrade: start classic, restart one by one with consumer; downgrade: the reverse; "
                        "streams: a Kafka Streams application classic -> streams -> classic")
    p.add_argument("--bootstrap", required=True, help="cluster bootstrap host:port (normally a kcoord gateway)")
    p.add_argument("--client", choices=("rdkafka", "java"), default="rdkafka",
                   help="librdkafka (confluent-kafka) or the Java kafka-clients 4.3 consumer (default %(default)s)")
    p.add_argument("--members", type=int, default=5, help="consumer processes in the group (default %(default)s)")
    p.add_argument("--topic", default=None, help="topic to use (created if missing; default a new one)")
    p.add_argument("--partitions", type=int, default=None, help="partitions of a created topic (default 2 per member)")
    p.add_argument("--group", default=None, help="group id (default a new one)")
    p.add_argument("--and-back", action="store_true", help="then roll every member back to the starting protocol")
    p.add_argument("--rate", type=float, default=50.0, help="records produced per second (default %(default)s)")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds of steady consumption before the first restart")
    p.add_argument("--dwell", type=float, default=2.0, help="seconds between a restart settling and the next one")
    p.add_argument("--settle-timeout", type=float, default=60.0, help="bound on one restart settling (s)")
    p.add_argument("--drain-timeout", type=float, default=30.0, help="bound on consuming the tail at the end (s)")
    p.add_argument("--sample-interval", type=float, default=0.25, help="group probe period (s)")
    p.add_argument("--classic-session-timeout-ms", type=int, default=10_000)
    p.add_argument("--classic-heartbeat-interval-ms", type=int, default=1_000)
    p.add_argument("--classic-assignor", default=None,
                   help="classic members' partition.assignment.strategy (e.g. cooperative-sticky)")
    p.add_argument("--java-cache", type=Path, default=None,
                   help="jar cache (default $KCOORD_JAVA_CACHE, $XDG_CACHE_HOME/kcoord/java or ~/.cache/kcoord/java)")
    s = p.add_argument_group("streams", "options of `kcoord rehearse streams` (also --bootstrap, --group as the "
                                        "application id, --topic as the input topic, --partitions, --rate, "
                                        "--settle-timeout, --drain-timeout, --sample-interval, "
                                        "--classic-session-timeout-ms, --java-cache, --out, --name)")
    s.add_argument("--instances", type=int, default=3, help="application instances per phase (default %(default)s)")
    s.add_argument("--stop", choices=("leave", "session"), default="leave",
                   help="how instances stop between phases: leave the group at once (CloseOptions LEAVE_GROUP), "
                        "or stay until the coordinator expires their sessions (REMAIN_IN_GROUP); default %(default)s")
    s.add_argument("--guarantee", choices=("at_least_once", "exactly_once_v2"), default="at_least_once",
                   help="the application's processing.guarantee; exactly_once_v2 commits offsets in its "
                        "transactions and the output topic is read read_committed (default %(default)s)")
    s.add_argument("--phase-seconds", type=float, default=3.0,
                   help="processing time of each phase once it settled (default %(default)s)")
    s.add_argument("--output-topic", default=None, help="the application's output topic (default a new one)")
    s.add_argument("--state-dir", type=Path, default=None,
                   help="the instances' state directories (default a temporary one, removed afterwards)")
    p.add_argument("--out", type=Path, default=Path("."), help="directory for the JSON and HTML report")
    p.add_argument("--name", default=None, help="report file stem (default rehearse-<direction>-<run id>)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.direction == "streams":
        return run_streams(args)
    from .rehearse import RehearsalPlan, rehearse, summary_lines, write_report

    try:
        plan = RehearsalPlan(
            direction=args.direction, bootstrap=args.bootstrap, client=args.client, members=args.members,
            topic=args.topic, partitions=args.partitions, group=args.group, round_trip=args.and_back,
            produce_rate=args.rate, warmup_s=args.warmup, dwell_s=args.dwell, settle_timeout_s=args.settle_timeout,
            drain_timeout_s=args.drain_timeout, sample_interval_s=args.sample_interval,
            classic_session_timeout_ms=args.classic_session_timeout_ms,
            classic_heartbeat_interval_ms=args.classic_heartbeat_interval_ms,
            classic_assignor=args.classic_assignor, java_cache=args.java_cache)
    except ValueError as exc:
        print(f"kcoord rehearse: {exc}", file=sys.stderr)
        return 2
    return _execute(args, "kcoord rehearse", "the Java client", plan.bootstrap,
                    lambda progress: rehearse(plan, progress), write_report, summary_lines)


def run_streams(args: argparse.Namespace) -> int:
    from .rehearse.streams import StreamsRehearsalPlan, rehearse_streams, streams_summary_lines, write_streams_report

    try:
        plan = StreamsRehearsalPlan(
            bootstrap=args.bootstrap, instances=args.instances, partitions=args.partitions or 4,
            input_topic=args.topic, output_topic=args.output_topic, app_id=args.group, stop=args.stop,
            guarantee=args.guarantee,
            produce_rate=args.rate, phase_s=args.phase_seconds, settle_timeout_s=args.settle_timeout,
            drain_timeout_s=args.drain_timeout, sample_interval_s=args.sample_interval,
            classic_session_timeout_ms=args.classic_session_timeout_ms, state_dir=args.state_dir,
            java_cache=args.java_cache)
    except ValueError as exc:
        print(f"kcoord rehearse streams: {exc}", file=sys.stderr)
        return 2
    return _execute(args, "kcoord rehearse streams", "Kafka Streams", plan.bootstrap,
                    lambda progress: rehearse_streams(plan, progress), write_streams_report, streams_summary_lines)


Report = dict[str, Any]


def _execute(args: argparse.Namespace, tool: str, needs: str, bootstrap: str,
             rehearse: Callable[[Callable[[str], None]], Report],
             write: Callable[[Report, Path, str | None], tuple[Path, Path]],
             lines: Callable[[Report], list[str]]) -> int:
    """Run a rehearsal, write its two reports, print its summary; the exit code by its verdict."""
    from confluent_kafka import KafkaException

    from .rehearse.engine import RehearsalAborted
    from .rehearse.java_jars import FetchError

    try:
        report = rehearse(_progress(args.quiet))
    except FetchError as exc:
        print(f"{tool}: {needs} is not available: {exc}", file=sys.stderr)
        return 2
    except (KafkaException, RehearsalAborted) as exc:  # before any member started: no report to write
        print(f"{tool}: cannot set up against {bootstrap}: {exc}", file=sys.stderr)
        return 2
    json_path, html_path = write(report, args.out, args.name)
    for line in lines(report):
        print(line)
    print(f"report: {json_path} {html_path}")
    return 0 if report["verdict"] == "pass" else 1


def _progress(quiet: bool) -> Callable[[str], None]:
    t0 = time.monotonic()

    def progress(msg: str) -> None:
        if not quiet:
            print(f"[{time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)
    return progress
