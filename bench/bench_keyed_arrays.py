"""Keyed arrays (coordinator/gateway/keyed_arrays.py): what distinct keys of one Java hashCode
cost a real Kafka, and what the gateway's checks cost.

    KCOORD_TEST_PORTS=27000-27999 .venv/bin/python bench/bench_keyed_arrays.py kafka \
        [--entries 10000 20000 40000] [--keys colliding|distinct|repeated]
    .venv/bin/python bench/bench_keyed_arrays.py check [--number 50000] [--baseline 3bdb300]

``kafka``: one Kafka 4.4 broker (tests/support/kafka_broker.py, its two network threads).
For each ``--entries`` N, one connection sends an AlterReplicaLogDirs v2 whose ``dirs`` hold N
paths (each with no topic): ``colliding``, N distinct paths of one Java hashCode (blocks of
"Aa" / "BB", which hash alike); ``distinct``, N paths of distinct hashCodes (the control);
``repeated``, one path N times. Right after it, four probe connections connected beforehand
(so both network threads serve some) each send an ApiVersions v0; reported: each probe's
time to its answer, and the hostile request's (answer or close). ``--entries max`` is the
largest N whose frame fits kcoord's max_decoded_request_bytes (4 MiB), the largest such a
request kcoord forwards.

``check``: the gateway's checks in process, timeit (best of 9): keyed_arrays' check of a decoded
DescribeLogDirs of 1 to 10,000 topics, and produce_check's walk of a Produce v9 of 1, 100 and
1,000 topics (one 100-byte record each), now and at ``--baseline`` (produce_check.py before the
repeated-name check), side by side: the difference is the check's cost on the hot path.

Benchmarks are not tests: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from coordinator.protocol.framing import write_uvarint  # noqa: E402  (after the path)

MAX_DECODED = 4 * 1024 * 1024      # coordinator/config.py max_decoded_request_bytes


def colliding_keys(n: int) -> list[str]:
    """n distinct strings of one Java String.hashCode: "Aa" and "BB" hash alike (65*31+97 ==
    66*31+66), so every string of k such blocks has the same hashCode."""
    k = max(1, (n - 1).bit_length())
    return ["".join("BB" if i >> b & 1 else "Aa" for b in range(k)) for i in range(n)]


def java_hash(text: str) -> int:
    h = 0
    for unit in struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def keys(kind: str, n: int) -> list[str]:
    if kind == "colliding":
        return colliding_keys(n)
    width = len(colliding_keys(n)[0])
    if kind == "distinct":
        return [f"{i:0{width}d}" for i in range(n)]
    return ["Aa" * (width // 2)] * n


def alter_replica_log_dirs(paths: list[str], correlation_id: int) -> bytes:
    """AlterReplicaLogDirs v2 (flexible, request header v2), each dir with no topic."""
    body = bytearray(write_uvarint(len(paths) + 1))
    for path in paths:
        raw = path.encode()
        body += write_uvarint(len(raw) + 1) + raw + b"\x01\x00"      # topics: empty; no tags
    body += b"\x00"
    header = struct.pack(">hhih", 34, 2, correlation_id, 5) + b"bench" + b"\x00"
    payload = header + bytes(body)
    return struct.pack(">i", len(payload)) + payload


def api_versions(correlation_id: int) -> bytes:
    payload = struct.pack(">hhih", 18, 0, correlation_id, 5) + b"probe"
    return struct.pack(">i", len(payload)) + payload


def max_entries(kind: str) -> int:
    n = 1 << 20
    while len(alter_replica_log_dirs(keys(kind, n), 1)) - 4 > MAX_DECODED:
        n = int(n * 0.97)
    return n


def _answer(sock: socket.socket) -> bytes | None:
    """One response frame, or None when the broker closed the connection."""
    def exactly(count: int) -> bytes | None:
        data = bytearray()
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            if not chunk:
                return None
            data += chunk
        return bytes(data)
    size = exactly(4)
    return None if size is None else exactly(struct.unpack(">i", size)[0])


def run_kafka(entries: list[str], kind: str) -> None:
    from support.kafka_broker import KAFKA_44, start_kafka

    with tempfile.TemporaryDirectory(prefix="bench-keyed-") as work:
        cluster = start_kafka(KAFKA_44, Path(work))
        try:
            for spec in entries:
                n = max_entries(kind) if spec == "max" else int(spec)
                paths = keys(kind, n)
                hashes = len({java_hash(p) for p in paths[:2000]})
                hostile_frame = alter_replica_log_dirs(paths, 1)
                probes = [socket.create_connection((cluster.host, cluster.port)) for _ in range(4)]
                for i, probe in enumerate(probes):     # connected and served before the hostile frame
                    probe.sendall(api_versions(100 + i))
                    assert _answer(probe) is not None
                hostile = socket.create_connection((cluster.host, cluster.port))
                hostile.settimeout(900)
                started = time.monotonic()
                hostile.sendall(hostile_frame)
                sent = time.monotonic()
                waits = []
                for i, probe in enumerate(probes):
                    probe.settimeout(900)
                    t0 = time.monotonic()
                    probe.sendall(api_versions(200 + i))
                    answered = _answer(probe) is not None
                    waits.append(f"{time.monotonic() - t0:.3f}s{'' if answered else ' (closed)'}")
                answer = _answer(hostile)
                took = time.monotonic() - started
                print(f"{kind} N={n:,} ({len(hostile_frame) - 4:,} bytes, {hashes} hashCode(s) among the first "
                      f"2,000 keys): sent in {sent - started:.3f}s; probes answered after {', '.join(waits)}; "
                      f"the request {'answered' if answer is not None else 'closed'} after {took:.2f}s",
                      flush=True)
                for s in (*probes, hostile):
                    s.close()
        finally:
            cluster.stop()


def _produce_check_at(rev: str):  # type: ignore[no-untyped-def]
    """produce_check.py as of ``rev``, loaded beside the current one (the baseline)."""
    import subprocess
    import types

    root = Path(__file__).resolve().parents[1]
    source = subprocess.check_output(["git", "show", f"{rev}:coordinator/gateway/produce_check.py"], cwd=root,
                                     text=True)
    module = types.ModuleType("coordinator.gateway._produce_check_baseline")
    module.__package__ = "coordinator.gateway"
    sys.modules[module.__name__] = module          # dataclasses look their module up
    exec(compile(source, f"{rev}:produce_check.py", "exec"), module.__dict__)
    return module


def run_check(number: int, baseline: str) -> None:
    import timeit
    from datetime import timedelta

    from aiokafka.record.default_records import DefaultRecordBatchBuilder
    from kio.schema.describe_log_dirs.v4.request import DescribableLogDirTopic, DescribeLogDirsRequest

    from coordinator.gateway import produce_check
    from coordinator.gateway.keyed_arrays import duplicate_key
    from coordinator.protocol.apis import request_class
    from coordinator.protocol.codec import encode_body
    from coordinator.protocol.framing import RequestHeader, frame, request_body_offset

    def best(call, count: int) -> float:  # type: ignore[no-untyped-def]
        return min(timeit.repeat(call, number=count, repeat=9)) / count * 1e6

    for n in (1, 100, 1_000, 10_000):
        request = DescribeLogDirsRequest(topics=tuple(
            DescribableLogDirTopic(topic=f"orders-{i}", partitions=(0, 1, 2)) for i in range(n)))
        count = max(1, number // n)
        print(f"keyed_arrays.duplicate_key, DescribeLogDirs of {n:,} topic(s): "
              f"{best(lambda r=request: duplicate_key(35, r), count):,.2f} µs", flush=True)

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 16)
    builder.append(0, timestamp=1_700_000_000_000, key=None, value=b"x" * 100, headers=[])
    records = bytes(builder.build())
    old = _produce_check_at(baseline)
    cls = request_class(0, 9)
    m = sys.modules[cls.__module__]
    for n in (1, 100, 1_000):
        request = cls(transactional_id=None, acks=1, timeout=timedelta(seconds=30), topic_data=tuple(
            m.TopicProduceData(name=f"orders.eu-west-1.{i}",
                               partition_data=(m.PartitionProduceData(index=0, records=records),))
            for i in range(n)))
        data = frame(RequestHeader(0, 9, 1, "producer-1").encode(2) + encode_body(request))
        offset = request_body_offset(data, 2)[1]
        count = max(1, number // n)
        for crc in (False, True):
            now = best(lambda d=data, o=offset, c=crc: produce_check.refused_partitions(
                d, o, 9, produce_check.RecordChecks(2**31 - 1, c)), count)
            before = best(lambda d=data, o=offset, c=crc: old.refused_partitions(
                d, o, 9, old.RecordChecks(2**31 - 1, c)), count)
            print(f"refused_partitions, Produce v9 of {n:,} topic(s) x 1 batch, crc={crc}: {now:,.2f} µs "
                  f"(at {baseline}: {before:,.2f} µs; {now - before:+,.2f} µs)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    kafka = sub.add_parser("kafka")
    kafka.add_argument("--entries", nargs="+", default=["10000", "20000", "40000"])
    kafka.add_argument("--keys", choices=("colliding", "distinct", "repeated"), default="colliding")
    check = sub.add_parser("check")
    check.add_argument("--number", type=int, default=50_000)
    check.add_argument("--baseline", default="3bdb300", help="the commit whose produce_check.py is compared")
    args = parser.parse_args()
    if args.what == "kafka":
        run_kafka(args.entries, args.keys)
    else:
        run_check(args.number, args.baseline)


if __name__ == "__main__":
    main()
