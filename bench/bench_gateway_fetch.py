"""What the gateway spends forwarding Fetch v16+ and Produce v10+ (issue 16), and how much of it
goes to the KIP-951 NodeEndpoints check of every answer (coordinator/gateway/leader_endpoints.py).

    .venv/bin/python bench/bench_gateway_fetch.py [--repos PATH,PATH...] [--runs 3]
        [--records 100000] [--record-bytes 1000] [--consume-partitions 4]
        [--produce-records 20000] [--produce-record-bytes 100] [--skip-wire] [--skip-micro]

1. **Per answer, in process** (no sockets): what the forward link runs on each upstream answer,
   ``rewrite_leader_endpoints(..., body_offset(frame, 1), ...)``, against the full walk that every
   answer went through before the fast check (``walk_leader_endpoints`` after
   ``decode_response_header``; with ``--micro-before FILE``, that file's
   rewrite_leader_endpoints instead, e.g. the code before the fast check:
   ``git show HEAD~1:coordinator/gateway/leader_endpoints.py > /tmp/before.py``), on
   kio-encoded answers of several shapes: one big partition, a few, many small ones, none, a
   Tansu-style answer (tag 0 present, the list empty), and one with a moved partition and
   NodeEndpoints (the walk's own case, where the check is pure overhead). The two alternate;
   CPU time per answer (thread_time), best of ``--micro-repeats``.
2. **Over the wire**: one Tansu broker and one ``kcoord serve`` per ``--repos`` source tree
   (default: this checkout), all running at once in front of it, so the trees differ by their
   code only. Tansu answers Fetch up to v17 and Produce up to v11; librdkafka (2.5+, KIP-951)
   then uses Fetch v16 and Produce v10 through kcoord, so every answer is checked. Tansu
   writes NodeEndpoints, empty, into every Fetch answer: the walk alone used to rebuild each
   such answer (a copy of the whole frame) to write the same bytes back. Each run
   visits every tree, the order flipping every run:
   - ``consume``: a librdkafka consumer reads ``--records`` records of ``--record-bytes``
     (``--consume-partitions`` partitions, assign() from the beginning). Tansu answers a
     consumer reading a backlog with a few MB per Fetch (it does not cut at
     max.partition.fetch.bytes), so this is the few-big-answers case;
   - ``produce``: ``--produce-records`` records of ``--produce-record-bytes`` produced through
     kcoord with acks=1 and linger.ms=0: many small Produce answers, where the per-answer
     cost shows.
   Reported: kcoord's CPU (schedstat, all threads, over the same interval) per MB and per
   answer (answers: kcoord_gateway_forwarded_requests_total from its --metrics-port), and
   MB/s; medians of ``--runs``. A tree whose rewrite_leader_endpoints returns the frame
   untouched (measurement only, never shipped) gives the floor: the gateway without any check.

Benchmarks are not tests: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import importlib.util
import os
import statistics
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadgen import procs  # noqa: E402

from coordinator.gateway.leader_endpoints import (  # noqa: E402
    body_offset,
    rewrite_leader_endpoints,
    walk_leader_endpoints,
)
from coordinator.protocol.apis import FETCH, PRODUCE, response_class  # noqa: E402
from coordinator.protocol.codec import encode_response_frame  # noqa: E402
from coordinator.protocol.framing import decode_response_header  # noqa: E402

TOPIC = "bench-gateway-fetch"
PRODUCE_TOPIC = "bench-gateway-produce"


# --- 1. per answer, in process ----------------------------------------------------------

def _fetch_answer(topics: int, partitions: int, record_bytes: int, moved: bool = False) -> bytes:
    from kio.schema.errors import ErrorCode
    from kio.schema.types import BrokerId
    from kio.static.primitive import i32, i32Timedelta, i64

    m = importlib.import_module(response_class(FETCH, 16).__module__)
    parts = [m.PartitionData(partition_index=i32(p), error_code=ErrorCode.none, high_watermark=i64(10),
                             last_stable_offset=i64(10), log_start_offset=i64(0), aborted_transactions=None,
                             preferred_read_replica=BrokerId(-1), records=b"\x01" * record_bytes)
             for p in range(partitions)]
    nodes: tuple = ()
    if moved:
        parts.append(m.PartitionData(partition_index=i32(partitions), error_code=ErrorCode.not_leader_or_follower,
                                     high_watermark=i64(-1), aborted_transactions=None, records=None,
                                     current_leader=m.LeaderIdAndEpoch(leader_id=BrokerId(2), leader_epoch=i32(3))))
        nodes = (m.NodeEndpoint(node_id=BrokerId(2), host="broker-2", port=i32(9094), rack=None),)
    responses = tuple(m.FetchableTopicResponse(topic_id=uuid.UUID(int=t + 1), partitions=tuple(parts))
                      for t in range(topics))
    return encode_response_frame(FETCH, 16, 1, response_class(FETCH, 16)(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)), error_code=ErrorCode.none,
        session_id=i32(1), responses=responses, node_endpoints=nodes))


def _produce_answer(topics: int, partitions: int) -> bytes:
    from kio.schema.errors import ErrorCode
    from kio.schema.types import TopicName
    from kio.static.primitive import i32, i32Timedelta, i64

    m = importlib.import_module(response_class(PRODUCE, 10).__module__)
    responses = tuple(m.TopicProduceResponse(name=TopicName(f"topic-{t}"), partition_responses=tuple(
        m.PartitionProduceResponse(index=i32(p), error_code=ErrorCode.none, base_offset=i64(5),
                                   record_errors=(), error_message=None) for p in range(partitions)))
        for t in range(topics))
    return encode_response_frame(PRODUCE, 10, 1, response_class(PRODUCE, 10)(
        responses=responses, throttle_time=i32Timedelta.parse(datetime.timedelta(0))))


SHAPES: dict[str, Callable[[], tuple[int, int, bytes]]] = {
    "fetch 1 partition, 1 MiB": lambda: (FETCH, 16, _fetch_answer(1, 1, 1 << 20)),
    "fetch 4 partitions, 256 KiB each": lambda: (FETCH, 16, _fetch_answer(1, 4, 1 << 18)),
    "fetch 4 partitions, 1 KiB each": lambda: (FETCH, 16, _fetch_answer(1, 4, 1 << 10)),
    "fetch 10 topics x 10 partitions, 100 B": lambda: (FETCH, 16, _fetch_answer(10, 10, 100)),
    "fetch no partitions (session, idle)": lambda: (FETCH, 16, _fetch_answer(0, 0, 0)),
    "produce 1 partition": lambda: (PRODUCE, 10, _produce_answer(1, 1)),
    "produce 10 topics x 10 partitions": lambda: (PRODUCE, 10, _produce_answer(10, 10)),
    "fetch 4 x 256 KiB, empty endpoints (Tansu)": lambda: (FETCH, 16, _empty_endpoints(_fetch_answer(1, 4, 1 << 18))),
    "fetch 4 partitions + 1 moved, endpoints": lambda: (FETCH, 16, _fetch_answer(1, 4, 1 << 10, moved=True)),
}


def _empty_endpoints(frame: bytes) -> bytes:
    """Tag 0 present and empty at the end, as Tansu writes every Fetch answer."""
    body = frame[4:-1] + b"\x01\x00\x01\x01"
    return len(body).to_bytes(4, "big") + body


def _address_of(node_id: int, host: str, port: int) -> tuple[str, int]:
    return "gateway", 19000 + node_id


_BEFORE = walk_leader_endpoints


def _before(api_key: int, version: int, frame: bytes) -> bytes:
    return _BEFORE(api_key, version, frame, decode_response_header(frame, 1)[1], _address_of)


def load_before(path: str) -> None:
    """The "before" column from another tree's leader_endpoints.py (its rewrite_leader_endpoints),
    e.g. ``git show HEAD:coordinator/gateway/leader_endpoints.py > /tmp/before.py``."""
    global _BEFORE
    spec = importlib.util.spec_from_file_location("coordinator.gateway._leader_endpoints_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _BEFORE = module.rewrite_leader_endpoints


def _after(api_key: int, version: int, frame: bytes) -> bytes:
    return rewrite_leader_endpoints(api_key, version, frame, body_offset(frame, 1), _address_of)


def _per_call(fn: Callable[[int, int, bytes], bytes], api_key: int, version: int, frame: bytes, n: int) -> float:
    started = time.thread_time()
    for _ in range(n):
        fn(api_key, version, frame)
    return (time.thread_time() - started) / n


def micro(repeats: int, budget: float) -> None:
    print(f"per answer, in process (CPU us, best of {repeats} alternating runs): before = "
          f"{_BEFORE.__module__}.{_BEFORE.__name__} after decode_response_header, after = "
          "rewrite_leader_endpoints after body_offset")
    print(f"  {'shape':44s} {'bytes':>9s} {'before':>9s} {'after':>9s}  before/after")
    for name, build in SHAPES.items():
        api_key, version, frame = build()
        assert _after(api_key, version, frame) == _before(api_key, version, frame), name
        started = time.thread_time()
        _before(api_key, version, frame)
        n = max(50, min(50_000, int(budget / max(time.thread_time() - started, 1e-6))))
        best = {"walk": float("inf"), "check": float("inf")}
        for i in range(repeats):
            order: list[tuple[str, Callable[[int, int, bytes], bytes]]] = [("walk", _before), ("check", _after)]
            for label, fn in (order if i % 2 == 0 else order[::-1]):
                best[label] = min(best[label], _per_call(fn, api_key, version, frame, n))
        print(f"  {name:44s} {len(frame):9d} {best['walk'] * 1e6:9.2f} {best['check'] * 1e6:9.2f}"
              f"  {best['walk'] / best['check']:5.1f}x")


# --- 2. over the wire -------------------------------------------------------------------

cpu_seconds = procs.cpu_seconds_fine


def forwarded(metrics_port: int, api: str) -> float:
    """kcoord_gateway_forwarded_requests_total of ``api``, every listener: the answers it checked."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    prefix = f'kcoord_gateway_forwarded_requests_total{{api="{api}",'
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


@contextlib.contextmanager
def kcoords_on_tansu() -> Iterator[tuple[procs.TansuBroker, dict[str, tuple[procs.Kcoord, int]]]]:
    """A Tansu broker and the kcoords a benchmark starts in front of it (name -> (process,
    metrics port), filled by the caller with `start_kcoord`); on a failure every kcoord's log
    tail is printed, and at the end every kcoord and the broker are stopped."""
    broker = procs.tansu()
    kcoords: dict[str, tuple[procs.Kcoord, int]] = {}
    try:
        yield broker, kcoords
    except BaseException:
        for kc, _ in kcoords.values():
            kc.print_log_tail()
        raise
    finally:
        for kc, _ in kcoords.values():
            kc.stop()
        broker.stop()


def start_kcoord(broker: procs.TansuBroker, config: tuple[str, ...], repo: Path = procs.REPO
                 ) -> tuple[procs.Kcoord, int]:
    """One `kcoord serve` in front of ``broker`` with its own metrics port: (process, metrics port)."""
    metrics_port = procs.free_ports(1)
    kc = procs.Kcoord(broker.bootstrap, config, 1, repo, extra_args=("--metrics-port", str(metrics_port))).start()
    return kc, metrics_port


def alternate(kcoords: dict[str, tuple[procs.Kcoord, int]],
              scenarios: dict[str, tuple[str, Callable[[procs.Kcoord], dict[str, float]]]], runs: int,
              title: str) -> None:
    """Each scenario on each kcoord, ``runs`` times, the order flipped every run; prints each
    run and then the medians: kcoord's CPU per MB and per answer of the scenario's API (its
    forwarded-requests metric), and MB/s. A scenario's run returns cpu_s, mb, mb_s, seconds."""
    results: dict[tuple[str, str], list[dict[str, float]]] = {(s, n): [] for s in scenarios for n in kcoords}
    for i in range(runs):
        for scenario, (api, run) in scenarios.items():
            for name in (list(kcoords) if i % 2 == 0 else list(reversed(kcoords))):
                kc, metrics_port = kcoords[name]
                before = forwarded(metrics_port, api)
                r = run(kc)
                r["answers"] = forwarded(metrics_port, api) - before
                r["ms_per_mb"] = r["cpu_s"] / r["mb"] * 1e3
                r["us_per_answer"] = r["cpu_s"] / max(r["answers"], 1) * 1e6
                results[(scenario, name)].append(r)
                print(f"  run {i + 1} {scenario:8s} {name:10s} {r['mb_s']:7.1f} MB/s  kcoord "
                      f"{r['ms_per_mb']:6.3f} ms CPU/MB, {r['us_per_answer']:7.1f} us CPU/answer "
                      f"({r['answers']:.0f} {api} answers, "
                      f"{r['mb'] / max(r['answers'], 1) * 1e3:.1f} kB each, {r['seconds']:.2f} s)")
    print(title)
    for scenario in scenarios:
        for name in kcoords:
            rs = results[(scenario, name)]
            cpu = sorted(r["ms_per_mb"] for r in rs)
            print(f"  {scenario:8s} {name:10s} {statistics.median(cpu):7.3f} ms CPU/MB (min {cpu[0]:.3f}, "
                  f"max {cpu[-1]:.3f})  {statistics.median(r['us_per_answer'] for r in rs):7.1f} us/answer  "
                  f"{statistics.median(r['mb_s'] for r in rs):7.1f} MB/s")


def produce_topic(bootstrap: str, topic: str, records: int, record_bytes: int, linger_ms: int,
                  kcoord_pid: int | None = None) -> dict[str, float]:
    """Produce ``records`` records; kcoord's CPU over produce() .. flush() when measured."""
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "compression.type": "none",
            "acks": 1, "queue.buffering.max.messages": 1_000_000}
    if linger_ms:
        conf["batch.size"] = 1 << 20
    producer = Producer(conf)
    value = os.urandom(record_bytes)
    failed: list = []
    first = time.monotonic()
    cpu_first = cpu_seconds(kcoord_pid) if kcoord_pid else 0.0
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value=value, on_delivery=lambda err, msg: failed.append(err) if err else None)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120) or failed:
        raise RuntimeError(f"producing {topic} through {bootstrap} failed: {failed[:3]}")
    seconds = time.monotonic() - first
    cpu = (cpu_seconds(kcoord_pid) - cpu_first) if kcoord_pid else float("nan")
    mb = records * record_bytes / 1e6
    return {"mb_s": mb / seconds, "seconds": seconds, "cpu_s": cpu, "mb": mb}


def consume_once(bootstrap: str, partitions: int, records: int, kcoord_pid: int,
                 extra: dict[str, object]) -> dict[str, float]:
    """Read ``records`` records from the beginning; kcoord's CPU from assign() to the last."""
    return procs.consume_from_beginning({"bootstrap.servers": bootstrap, **extra}, TOPIC, partitions, records,
                                        cpu=lambda: cpu_seconds(kcoord_pid))


def wire(args: argparse.Namespace, repos: list[Path]) -> None:
    with kcoords_on_tansu() as (broker, kcoords):
        procs.run(procs.create_topic("127.0.0.1", broker.port, TOPIC, args.consume_partitions))
        procs.run(procs.create_topic("127.0.0.1", broker.port, PRODUCE_TOPIC, args.consume_partitions))
        for repo in repos:
            name = repo.name if repo.name not in kcoords else str(repo)
            kcoords[name] = start_kcoord(broker, ("consumer_session_timeout_ms=60000",), repo)
            kc = kcoords[name][0]
            print(f"  {name}: kcoord pid {kc.pid} on 127.0.0.1:{kc.port} from {repo}")
        started = time.monotonic()
        produce_topic(broker.bootstrap, TOPIC, args.records, args.record_bytes, linger_ms=20)
        print(f"  {args.records} records of {args.record_bytes} B produced to Tansu in "
              f"{time.monotonic() - started:.1f}s")
        # scenario -> (API whose answers are checked, run against one kcoord)
        scenarios: dict[str, tuple[str, Callable[[procs.Kcoord], dict[str, float]]]] = {
            "consume": ("fetch", lambda kc: consume_once(f"127.0.0.1:{kc.port}", args.consume_partitions,
                                                         args.records, kc.pid, {})),
            "produce": ("produce", lambda kc: produce_topic(
                f"127.0.0.1:{kc.port}", PRODUCE_TOPIC, args.produce_records, args.produce_record_bytes,
                linger_ms=0, kcoord_pid=kc.pid)),
        }
        alternate(kcoords, scenarios, args.runs,
                  f"over the wire, median of {args.runs}: kcoord CPU per MB and per {{fetch, produce}} answer; MB/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repos", default=str(procs.REPO), help="comma-separated source trees, one kcoord each")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--consume-partitions", type=int, default=4)
    parser.add_argument("--produce-records", type=int, default=20_000)
    parser.add_argument("--produce-record-bytes", type=int, default=100)
    parser.add_argument("--micro-repeats", type=int, default=5)
    parser.add_argument("--micro-budget", type=float, default=0.2, help="CPU seconds per shape and variant and repeat")
    parser.add_argument("--micro-before", help="leader_endpoints.py whose rewrite_leader_endpoints is the "
                        "before column (default: this tree's full walk alone, walk_leader_endpoints)")
    parser.add_argument("--skip-micro", action="store_true")
    parser.add_argument("--skip-wire", action="store_true")
    args = parser.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    print(f"cpus={os.cpu_count()} load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"{os.getloadavg()[2]:.2f} at {time.strftime('%H:%M:%S', time.gmtime())} UTC")
    if args.micro_before:
        load_before(args.micro_before)
    if not args.skip_micro:
        micro(args.micro_repeats, args.micro_budget)
    if not args.skip_wire:
        repos = [Path(p).resolve() for p in args.repos.split(",")]
        print(f"over the wire: runs={args.runs} records={args.records} record_bytes={args.record_bytes} "
              f"consume_partitions={args.consume_partitions} produce_records={args.produce_records} "
              f"produce_record_bytes={args.produce_record_bytes}")
        wire(args, repos)
    print(f"load average at the end {os.getloadavg()[0]:.2f} at {time.strftime('%H:%M:%S', time.gmtime())} UTC")


if __name__ == "__main__":
    main()
