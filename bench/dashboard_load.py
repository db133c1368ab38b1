"""The load behind the dashboard pictures in docs/dashboard/: kcoord under a fixed timeline
of groups and failures, scraped and rendered by ops/deploy/render_dashboard.py.

    .venv/bin/python bench/dashboard_load.py [--seconds 90] [--interval 1] [--out docs/dashboard] [--cluster]

One process (default): a Tansu broker and a real `kcoord serve --metrics-port` in front of
it. The load, over `--seconds` (fractions of the run):
- 0: 4 KIP-848 groups of 40 simulated consumers (bench/loadgen) heartbeat on the interval
  kcoord hands them; a producer sends 50 records/s through kcoord (forwarded to Tansu);
- 1/3: 2 more groups of 40 and 40 more members in the first group (rebalances, and the
  adaptive interval stretches: kcoord runs with a heartbeat budget of 300/s);
- 0.45 and 0.55: two classic consumers (librdkafka, group.protocol=classic) join one group;
- 2/3: the second wave stops heartbeating and is expired by the 10 s session timeout;
- 0.8: one classic consumer leaves (LeaveGroup).
`--cluster` runs three instances in front of Apache Kafka 4.4 instead, with real consumers,
a kill -9 and a scale-down (bench/dashboard_cluster.py).
Progress is printed every 5 s. Ports come from KCOORD_BENCH_PORTS (bench/loadgen/procs.py)
and KCOORD_TEST_PORTS (tests/support/ports.py).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))   # support/: the brokers and kcoord processes of the tests

from loadgen import procs  # noqa: E402

from ops.deploy.render_dashboard import Scraper, write  # noqa: E402

TOPIC_PARTITIONS = 12
KCOORD_CONFIG = ("consumer_session_timeout_ms=10000", "consumer_heartbeat_budget_per_second=300")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=90.0, help="length of the run (default 90)")
    p.add_argument("--interval", type=float, default=1.0, help="scrape interval in seconds (default 1)")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "dashboard")
    p.add_argument("--cluster", action="store_true",
                   help="three `kcoord serve --instance-id` processes in front of Apache Kafka 4.4, with "
                        "real consumers, a kill -9 and a scale-down (bench/dashboard_cluster.py)")
    args = p.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.cluster:
        from dashboard_cluster import run_cluster
        scraper, note = run_cluster(args.seconds, args.interval, Scraper, producer)
        note = f"A real run from {started}. {note}"
    else:
        scraper, note = _run_with_load(args, started)
    command = " ".join(["python bench/dashboard_load.py", *(argv if argv is not None else sys.argv[1:])])
    return write(scraper, args.out, note, command)


def _classic_consumer(bootstrap: str, topic: str, group: str, stop: threading.Event) -> threading.Thread:
    from confluent_kafka import Consumer

    def run() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "classic",
                             "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        try:
            while not stop.is_set():
                consumer.poll(0.2)
        finally:
            consumer.close()        # LeaveGroup

    thread = threading.Thread(target=run, daemon=True, name=f"classic-{group}")
    thread.start()
    return thread


def producer(bootstrap: str, topic: str, stop: threading.Event) -> threading.Thread:
    from confluent_kafka import Producer

    def run() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 2})  # as dashboard_cluster
        payload = os.urandom(512)
        while not stop.wait(0.02):          # 50 records/s
            producer.produce(topic, payload)
            producer.poll(0)
        producer.flush(10)

    thread = threading.Thread(target=run, daemon=True, name="producer")
    thread.start()
    return thread


async def run_load(host: str, port: int, topic: str, seconds: float, scraper: Scraper) -> None:
    from loadgen.client import MemberDriver, open_connections
    from loadgen.consumer_member import ConsumerMember

    bootstrap = f"{host}:{port}"
    run_id = uuid.uuid4().hex[:6]
    stop_threads, stop_first_classic = threading.Event(), threading.Event()
    threads = [producer(bootstrap, topic, stop_threads)]
    conns = await open_connections(host, port, 4)
    wave1 = [ConsumerMember(f"dash-{run_id}-g{g}", (topic,)) for g in range(4) for _ in range(40)]
    wave2 = [ConsumerMember(f"dash-{run_id}-g{g}", (topic,)) for g in (0, 4, 5) for _ in range(40)]
    drivers = [MemberDriver(conns[:2], wave1)]
    drivers[0].start()
    classic = f"dash-{run_id}-classic"
    events = [(seconds / 3, "second wave: 120 members join", lambda: _start(drivers, conns[2:], wave2)),
              (seconds * 0.45, "classic consumer 1 joins",
               lambda: threads.append(_classic_consumer(bootstrap, topic, classic, stop_first_classic))),
              (seconds * 0.55, "classic consumer 2 joins",
               lambda: threads.append(_classic_consumer(bootstrap, topic, classic, stop_threads))),
              (seconds * 2 / 3, "second wave stops heartbeating", lambda: drivers[1].stop()),
              (seconds * 0.8, "classic consumer 1 leaves", stop_first_classic.set)]
    t0, next_report = scraper.t0, 0.0
    try:
        while (elapsed := time.monotonic() - t0) < seconds:
            while events and events[0][0] <= elapsed:
                _, what, action = events.pop(0)
                action()
                print(f"[{elapsed:5.1f}s] {what}", flush=True)
            if elapsed >= next_report:
                sent = sum(d.requests for d in drivers)
                print(f"[{elapsed:5.1f}/{seconds:.0f}s] scrapes {len(scraper.store.scrape_times)} "
                      f"(failed {len(scraper.failures)}), heartbeats sent {sent}", flush=True)
                next_report += 5
            await asyncio.sleep(0.1)
    finally:
        for d in drivers:
            d.stop()
        for c in conns:
            c.close()
        stop_threads.set()
        stop_first_classic.set()
        for t in threads:
            t.join(15)


def _start(drivers: list, conns: list, members: list) -> None:
    from loadgen.client import MemberDriver

    driver = MemberDriver(conns, members)
    drivers.append(driver)
    driver.start()


def _run_with_load(args, started: str) -> tuple[Scraper, str]:
    broker = procs.tansu()
    kcoord = None
    try:
        topic = f"dash-{uuid.uuid4().hex[:6]}"
        procs.run(procs.create_topic(broker.host, broker.port, topic, TOPIC_PARTITIONS))
        metrics_port = procs.free_ports(1)
        kcoord = procs.Kcoord(broker.bootstrap, config=KCOORD_CONFIG, state_partitions=4,
                              extra_args=("--metrics-port", str(metrics_port))).start()
        print(f"kcoord on 127.0.0.1:{kcoord.port} (pid {kcoord.pid}), upstream Tansu {broker.bootstrap}; "
              f"metrics on :{metrics_port}", flush=True)
        scraper = Scraper([f"http://127.0.0.1:{metrics_port}/metrics"], args.interval, time.monotonic())
        scraper.start()
        try:
            procs.run(run_load("127.0.0.1", kcoord.port, topic, args.seconds, scraper))
        finally:
            scraper.done.set()
            scraper.join(5)
    finally:
        if kcoord is not None:
            kcoord.stop()
        broker.stop()
    note = (f"A real run from {started}: kcoord (--config {' '.join(KCOORD_CONFIG)}, 4 state partitions) in "
            f"front of one Tansu broker, scraped every {args.interval:g}s for {args.seconds:g}s; load as in "
            f"bench/dashboard_load.py (KIP-848 and classic groups, a producer). Queries evaluated by "
            f"ops/deploy/promql.py, the dashboard's own PromQL.")
    return scraper, note


if __name__ == "__main__":
    sys.exit(main())
