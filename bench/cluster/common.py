"""Shared parts of the issue 14 cluster benchmarks (bench_failover, bench_cluster_rebalance,
bench_cluster_heartbeat): Apache Kafka 4.4 from tests/support (its fixture settings lower
group.min.session.timeout.ms to 1 s, so a 2 s membership session is accepted), `kcoord serve
--instance-id` processes logging JSON, the raw FindCoordinator / OffsetCommit / OffsetFetch
calls of tests/integration/cluster/test_kcoord_cluster.py, and log parsing.

Everything is real: a real broker, real kcoord processes, the Kafka wire protocol.
"""
from __future__ import annotations

import datetime
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from support.group_probe import commit, commit_request, fetch, find  # noqa: E402,F401  (re-exported)
from support.kcoord import FAST, KcoordProcess  # noqa: E402
from support.wait import wait_until  # noqa: E402

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 10, 8, 9


def use_ports(default: str = "29500-29549") -> None:
    """The loopback port range kcoord and Kafka take (support.ports reads KCOORD_TEST_PORTS at
    each call); an explicit KCOORD_TEST_PORTS wins. Called by the scripts' main(), not at
    import, so importing these helpers (unit tests) changes nothing."""
    os.environ.setdefault("KCOORD_TEST_PORTS", default)


def median(values: Iterable[float]) -> float:
    values = [v for v in values if v == v]      # drop NaN (a part a run could not derive)
    return statistics.median(values) if values else float("nan")


def start_kafka44(prefix: str):
    """Apache Kafka 4.4, one KRaft node, with the test fixture's settings (kafka_broker.SETTINGS:
    group.min.session.timeout.ms=1000 among them)."""
    from support.kafka_broker import KAFKA_44, start_kafka

    print("starting Apache Kafka 4.4 ...", flush=True)
    return start_kafka(KAFKA_44, Path(tempfile.mkdtemp(prefix=prefix)))


def cluster_config(session_ms: int, *, heartbeat_ms: int | None = None, margin_ms: int | None = None,
                   fencing: str | None = None, extra: Sequence[str] = (), fast: bool = True) -> tuple[str, ...]:
    """`--config` items of a cluster member. Heartbeat every tenth of the session and a lease
    margin of a third unless given (the integration tests use 3000 / 300 / 1000). ``fast``:
    the tests' consumer-group settings (FAST), else kcoord's defaults for groups."""
    heartbeat_ms = heartbeat_ms or max(100, session_ms // 10)
    margin_ms = margin_ms or session_ms // 3
    items = [*(FAST if fast else ()), f"cluster.session.timeout.ms={session_ms}",
             f"cluster.heartbeat.interval.ms={heartbeat_ms}", f"cluster.lease.margin.ms={margin_ms}",
             "cluster.rebalance.timeout.ms=10000", *extra]
    if fencing:
        items.append(f"fencing={fencing}")
    return tuple(items)


class JsonKcoord(KcoordProcess):
    """`kcoord --log-format json --log-level LEVEL serve ...`: one JSON object per log line,
    with a millisecond UTC timestamp, in ``log_path`` (stderr)."""

    def serve_args(self) -> list[str]:
        args = super().serve_args()          # `--log-level` (KcoordProcess.log_level) among them
        at = args.index("coordinator.cli") + 1          # the global options go before `serve`
        return [*args[:at], "--log-format", "json", *args[at:]]


def start_instances(bootstrap: str, state_topic: str, n: int, shards: int, config: tuple[str, ...],
                    *, first: int = 0, log_level: str = "INFO", timeout: float = 90.0,
                    clustered: bool = True, extra_args: Sequence[str] = ()) -> list[JsonKcoord]:
    """``n`` cluster members kc-<first>.. (``clustered=False``: a plain single process, no
    --instance-id); each start returns once it printed "kcoord ready"."""
    from coordinator.runtime.state_topic import TOPIC_CONFIGS
    from support.admin import create_topic
    # Created here, with kcoord's settings, and visible in metadata before the first start:
    # created by `kcoord serve` itself, the fenced log's first Metadata can come before the
    # broker's metadata cache holds the new topic (UNKNOWN_TOPIC_OR_PARTITION, and the
    # process exits) on a loaded machine. Reported to the lead; the bench does not race it.
    if first == 0:
        create_topic(bootstrap, state_topic, shards, config=dict(TOPIC_CONFIGS), timeout=60)
    procs = []
    for i in range(first, first + n):
        p = JsonKcoord(bootstrap, state_topic, state_partitions=shards, config=config,
                       extra_args=(*(("--instance-id", f"kc-{i}") if clustered else ()), *extra_args))
        p.log_level = log_level
        procs.append(p)
        p.start(timeout=timeout)
        print(f"  kcoord kc-{i} ready on {p.bootstrap} (pid {p.process.pid})", flush=True)
    return procs


def stop_all(procs: Iterable[KcoordProcess]) -> None:
    for p in procs:
        if p.process is not None and p.process.poll() is None:
            p.kill()          # the run is over; a clean leave would only cost time


# ---------------------------------------------------------------- raw calls


def coordinators(procs: Sequence[KcoordProcess], groups: Sequence[str]) -> dict[str, int] | None:
    """Each group's coordinator port if every process names the same one, else None."""
    out = {}
    for g in groups:
        try:
            answers = {find(p.bootstrap, g) for p in procs}
        except OSError:
            return None
        if len(answers) != 1:
            return None
        code, _, _, port = answers.pop()
        if code:
            return None
        out[g] = port
    return out


def wait_settled(procs: Sequence[KcoordProcess], groups: Sequence[str], timeout: float = 90.0) -> dict[str, int]:
    """Wait until every process names the same coordinator for every group and the groups
    spread over all of them; the group -> coordinator port map."""
    def settled():
        c = coordinators(procs, groups)
        return c if c is not None and len(set(c.values())) == len(procs) else None

    return wait_until(settled, timeout, interval=0.2, message=f"{len(procs)} kcoord instances settle")








# ---------------------------------------------------------------- logs
def kcoord_log(path: Path | None) -> list[tuple[float, str]]:
    """(epoch seconds, message) of each JSON log line of a kcoord process."""
    import orjson

    out = []
    if path is None or not path.exists():
        return out
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        t = datetime.datetime.fromisoformat(entry["time"]).timestamp()
        out.append((t, entry.get("message", "")))
    return out


_KAFKA_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] (\w+) (.*)$")


def kafka_log(path: Path, contains: str) -> list[tuple[float, str]]:
    """(epoch seconds, text) of the broker's log lines holding ``contains``. Log4j writes the
    local time without a zone; it is read as local time, as time.time() is."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if contains not in line:
            continue
        m = _KAFKA_LINE.match(line)
        if m:
            t = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
            out.append((t, m.group(4)))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
