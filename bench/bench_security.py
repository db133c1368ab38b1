"""What TLS costs kcoord (issue 13, point 9): steady heartbeats/s and gateway consume throughput,
TLS off and on, in the same run, interleaved.

    .venv/bin/python bench/bench_security.py [--members 1000] [--groups 10] [--seconds 5]
        [--runs 5] [--window 128] [--workers 2] [--records 200000] [--record-bytes 1000] [--no-sasl]

Set-up, over the wire: one Tansu broker; one `kcoord serve --upstream <tansu>` process with two
listeners, ``PLAINTEXT`` (bare host:port) and ``SSL`` (PEM keystore from a throwaway CA,
bench-made), and unless ``--no-sasl`` a third, ``SASL_SSL``, with SASL terminated at kcoord
(``sasl.termination=true``, PLAIN against a SCRAM credential file; Tansu cannot authenticate,
docs/user/security-sasl.md). All listeners are the same process, the same groups and the same data,
so the only difference between the rows is the security layer (TLS handshake and SASL once
per connection, then record encryption both ways).

1. **Heartbeats/s** (KIP-848 ConsumerGroupHeartbeat v1, steady): ``--members`` simulated
   consumers in ``--groups`` groups join through the PLAINTEXT listener and become Stable
   (loadgen.groups, as bench_heartbeat.py); their steady heartbeats, pre-encoded, are then
   sent pipelined (``--workers`` processes, one connection each, ``--window`` in flight) to
   each listener in turn (loadgen.tls_blast: the same generator code, the socket wrapped in
   TLS or not, authenticated with SASL PLAIN or not). Reported: requests/s and kcoord's CPU per request (/proc over the
   measured window), error responses (must be 0).
2. **Consume throughput through the gateway**: ``--records`` records of ``--record-bytes``
   bytes pre-produced to a topic of ``--consume-partitions`` partitions on Tansu; a librdkafka
   consumer (confluent-kafka; assign() from the beginning, no group) reads them all through
   each of kcoord's listeners (Fetch forwarded upstream on the client's link), and,
   as the reference, straight from Tansu. Reported: MB/s and records/s from assign() to the
   last record (connection, TLS handshake and metadata included), and kcoord's CPU per MB
   over the same interval.

Runs alternate the variants (the order flips every run); medians of ``--runs``.
Benchmarks are not tests: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_heartbeat import kcoord_frames  # noqa: E402
from loadgen import procs  # noqa: E402
from loadgen.blast import BlastResult  # noqa: E402
from loadgen.tls_blast import blast_pipelined  # noqa: E402
from loadgen.wire import CONSUMER_GROUP_HEARTBEAT, response_error_offset  # noqa: E402

from coordinator.security.sasl_server import scram_entry  # noqa: E402

TOPIC = "bench-heartbeat"          # what the simulated members subscribe to
SASL_USER, SASL_PASSWORD = "bench", "bench-secret"
CONSUME_TOPIC = "bench-consume"


def make_certs(directory: Path) -> tuple[Path, Path]:
    """(CA file, kcoord's PEM keystore) from tests/support/tls_certs.py (procs put tests/ on the path)."""
    from support.tls_certs import TestCA

    ca = TestCA("kcoord bench CA")
    keystore = directory / "kcoord.pem"
    ca.keystore(keystore, "localhost")
    return ca.write_ca(directory / "ca.pem"), keystore


def produce(bootstrap: str, records: int, record_bytes: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "compression.type": "none", "queue.buffering.max.messages": 1_000_000})
    value = os.urandom(record_bytes)
    failed = []
    for _ in range(records):
        while True:
            try:
                producer.produce(CONSUME_TOPIC, value=value,
                                 on_delivery=lambda err, msg: failed.append(err) if err else None)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) or failed:
        raise RuntimeError(f"producing the consume topic failed: {failed[:3]}")


def consume_once(bootstrap: str, partitions: int, records: int, ssl_ca: Path | None,
                 sasl: tuple[str, str] | None, kcoord_pid: int | None) -> dict[str, float]:
    """Read ``records`` records from the beginning; rate from assign() (connections, TLS
    handshakes and metadata included) to the last record, kcoord's CPU over the same interval."""
    conf: dict[str, object] = {"bootstrap.servers": bootstrap}
    if ssl_ca is not None:
        conf.update({"security.protocol": "SSL", "ssl.ca.location": str(ssl_ca)})
    if sasl is not None:
        conf.update({"security.protocol": "SASL_SSL" if ssl_ca is not None else "SASL_PLAINTEXT",
                     "sasl.mechanism": "PLAIN", "sasl.username": sasl[0], "sasl.password": sasl[1]})
    return procs.consume_from_beginning(conf, CONSUME_TOPIC, partitions, records,
                                        cpu=(lambda: procs.cpu_seconds(kcoord_pid)) if kcoord_pid else None)


def fmt_heartbeat(r: BlastResult) -> str:
    us = r.server_cpu["kcoord"] / r.responses * 1e6 if r.responses else float("nan")
    return (f"{r.rate:>9,.0f} req/s  kcoord {us:5.1f} us/req ({r.server_cpu['kcoord'] / r.window:4.2f} cores)"
            f"  generator {r.generator_cpu / max(r.responses, 1) * 1e6:5.1f} us/req  errors {dict(r.errors) or 0}")


def fmt_consume(r: dict[str, float]) -> str:
    return (f"{r['mb_s']:7.1f} MB/s {r['records_s']:>9,.0f} records/s ({r['seconds']:.2f} s)"
            f"  kcoord {r['cpu_ms_per_mb']:6.2f} ms CPU/MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=100, help="partitions of the heartbeat topic")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--window", type=int, default=128, help="requests in flight per connection")
    parser.add_argument("--workers", type=int, default=2, help="heartbeat load-generator processes")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--consume-partitions", type=int, default=4)
    parser.add_argument("--state-partitions", type=int, default=4)
    parser.add_argument("--no-sasl", action="store_true", help="no SASL_SSL listener (SASL terminated at kcoord)")
    parser.add_argument("--skip-heartbeat", action="store_true")
    parser.add_argument("--skip-consume", action="store_true")
    args = parser.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    print(f"members={args.members} groups={args.groups} partitions={args.partitions} workers={args.workers} "
          f"window={args.window} seconds={args.seconds} runs={args.runs} records={args.records} "
          f"record_bytes={args.record_bytes} consume_partitions={args.consume_partitions} cpus={os.cpu_count()}")
    work = Path(tempfile.mkdtemp(prefix="kcoord-bench-security-"))
    ca, keystore = make_certs(work)
    broker = procs.tansu()
    kc = None
    try:
        procs.run(procs.create_topic("127.0.0.1", broker.port, TOPIC, args.partitions))
        procs.run(procs.create_topic("127.0.0.1", broker.port, CONSUME_TOPIC, args.consume_partitions))
        ssl_port = procs.free_ports(2)             # bootstrap + the per-broker listener
        config = ["consumer_session_timeout_ms=60000", "ssl.keystore.type=PEM", f"ssl.keystore.location={keystore}"]
        extra = ["--listen", f"SSL://127.0.0.1:{ssl_port}"]
        sasl_port = 0
        if not args.no_sasl:      # SASL terminated at kcoord (the upstream, Tansu, cannot authenticate)
            sasl_port = procs.free_ports(2)
            credentials = work / "sasl-credentials"
            credentials.write_text(scram_entry(SASL_USER, SASL_PASSWORD) + "\n")
            config += ["sasl.termination=true", f"sasl.credentials.file={credentials}",
                       "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512", "authorizer=none"]
            extra += ["--listen", f"SASL_SSL://127.0.0.1:{sasl_port}"]
        kc = procs.Kcoord(broker.bootstrap, tuple(config), args.state_partitions, extra_args=tuple(extra)).start()
        # name -> (port, CA for TLS, SASL PLAIN credentials)
        listeners = {"plaintext": (kc.port, None, None), "ssl": (ssl_port, ca, None)}
        if sasl_port:
            listeners["sasl_ssl"] = (sasl_port, ca, (SASL_USER, SASL_PASSWORD))
        print(f"kcoord pid {kc.pid}: " + ", ".join(f"{name} 127.0.0.1:{port}"
                                                  for name, (port, _, _) in listeners.items()))

        if not args.skip_heartbeat:
            started = time.monotonic()
            frames = procs.run(kcoord_frames(kc.port, args))
            print(f"heartbeats: {args.members} members joined and Stable in {time.monotonic() - started:.1f}s")
            runs: dict[str, list[BlastResult]] = {name: [] for name in listeners}
            for i in range(args.runs):
                order = list(listeners) if i % 2 == 0 else list(reversed(listeners))
                for name in order:
                    port, ssl_ca, sasl = listeners[name]
                    r = blast_pipelined("127.0.0.1", port, response_error_offset(CONSUMER_GROUP_HEARTBEAT, 1),
                                        frames, ssl_ca=str(ssl_ca) if ssl_ca else None, sasl_plain=sasl,
                                        workers=args.workers,
                                        window_size=args.window, seconds=args.seconds, warmup=args.warmup,
                                        server_pids={"kcoord": kc.pid})
                    runs[name].append(r)
                    print(f"  run {i + 1} {name:9s} {fmt_heartbeat(r)}")
            print("heartbeats/s, median:")
            medians = {}
            for name, rs in runs.items():
                rate = statistics.median(r.rate for r in rs)
                us = statistics.median(r.server_cpu["kcoord"] / max(r.responses, 1) * 1e6 for r in rs)
                medians[name] = rate
                print(f"  {name:9s} {rate:>9,.0f} req/s (min {min(r.rate for r in rs):,.0f}, "
                      f"max {max(r.rate for r in rs):,.0f}, n={len(rs)})  kcoord CPU {us:.1f} us/req  "
                      f"errors {sum(sum(r.errors.values()) for r in rs)}")
            for name in medians:
                if name != "plaintext":
                    print(f"  {name} / plaintext = {medians[name] / medians['plaintext']:.2f}")

        if not args.skip_consume:
            started = time.monotonic()
            produce(broker.bootstrap, args.records, args.record_bytes)
            print(f"consume: {args.records} records of {args.record_bytes} B produced to Tansu in "
                  f"{time.monotonic() - started:.1f}s")
            variants = {"direct": (broker.bootstrap, None, None, None)}
            for name, (port, ssl_ca, sasl) in listeners.items():
                variants[name] = (f"127.0.0.1:{port}", ssl_ca, sasl, kc.pid)
            results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
            for i in range(args.runs):
                order = list(variants) if i % 2 == 0 else list(reversed(variants))
                for name in order:
                    bootstrap, ssl_ca, sasl, pid = variants[name]
                    r = consume_once(bootstrap, args.consume_partitions, args.records, ssl_ca, sasl, pid)
                    results[name].append(r)
                    print(f"  run {i + 1} {name:9s} {fmt_consume(r)}")
            print("consume through the gateway, median:")
            for name, rs in results.items():
                line = (f"  {name:9s} {statistics.median(r['mb_s'] for r in rs):7.1f} MB/s "
                        f"{statistics.median(r['records_s'] for r in rs):>9,.0f} records/s (n={len(rs)})")
                if name != "direct":
                    line += f"  kcoord CPU {statistics.median(r['cpu_ms_per_mb'] for r in rs):.2f} ms/MB"
                print(line)
        print(f"kcoord RSS {procs.rss_kib(kc.pid) / 1024:.0f} MiB")
    except BaseException:
        if kc is not None:
            kc.print_log_tail()
        raise
    finally:
        if kc is not None:
            kc.stop()
        broker.stop()


if __name__ == "__main__":
    main()
