"""The cluster run of bench/dashboard_load.py (`--cluster`): three `kcoord serve
--instance-id` processes in front of Apache Kafka 4.4, with real clients and failures.

Rules: everything started here is stopped here (try/finally), every wait is bounded and
says what it waited for; the timeline is fixed so two runs draw comparable pictures.
Kafka, not Tansu: Tansu 0.6 cannot carry kcoord's membership group.

Timeline over `seconds` (fractions of the run), after the cluster has settled:
- 0: 3 KIP-848 groups of 3 librdkafka consumers (group.protocol=consumer, auto-commit)
  bootstrap on the three instances in turn; a producer sends 50 records/s;
- 0.3: kcoord-1 is killed (SIGKILL): its shards move once its membership session ends;
- 0.5: kcoord-1 restarts with the same instance id (static membership) and takes a share back;
- 0.7: kcoord-2 gets SIGTERM (a scale-down: it leaves the group, its shards move at once);
- 0.85: kcoord-2 restarts.
"""
from __future__ import annotations

import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

INSTANCES = 3
SHARDS = 12
TOPIC_PARTITIONS = 6
CONFIG = ("consumer_session_timeout_ms=10000", "cluster.session.timeout.ms=6000",
          "cluster.heartbeat.interval.ms=500")


def _consumer(bootstrap: str, topic: str, group: str, stop: threading.Event) -> threading.Thread:
    from confluent_kafka import Consumer

    def run() -> None:
        # log_level 2: the run kills instances on purpose, and the clients' reconnect errors
        # (level 3) would bury the progress lines.
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                             "auto.offset.reset": "earliest", "auto.commit.interval.ms": 2000, "log_level": 2})
        consumer.subscribe([topic])
        try:
            while not stop.is_set():
                consumer.poll(0.2)
        finally:
            consumer.close()

    thread = threading.Thread(target=run, daemon=True, name=f"consumer-{group}")
    thread.start()
    return thread


def run_cluster(seconds: float, interval: float, scraper_class, producer) -> tuple:
    """(scraper with the run's samples, a sentence describing the run); ``producer`` starts
    the producer thread (bench/dashboard_load.py's)."""
    from support.admin import create_topic
    from support.kafka_broker import KAFKA_44, start_kafka
    from support.kcoord import KcoordProcess
    from support.ports import free_port
    from support.wait import wait_until

    work = Path(tempfile.mkdtemp(prefix="kcoord-dash-kafka-"))
    print(f"starting Apache Kafka {KAFKA_44} (logs in {work})", flush=True)
    kafka = start_kafka(KAFKA_44, work)
    procs: list = []
    stop, threads = threading.Event(), []
    try:
        run_id = uuid.uuid4().hex[:6]
        topic = f"dash-{run_id}"
        create_topic(kafka.bootstrap, topic, TOPIC_PARTITIONS)
        metrics_ports = [free_port() for _ in range(INSTANCES)]
        procs = [KcoordProcess(kafka.bootstrap, f"__kcoord_dash_{run_id}", state_partitions=SHARDS, config=CONFIG,
                               extra_args=("--instance-id", f"kcoord-{i}", "--metrics-port", str(metrics_ports[i])))
                 for i in range(INSTANCES)]
        for i, p in enumerate(procs):
            p.start(timeout=90)
            print(f"kcoord-{i} on {p.bootstrap}, metrics on :{metrics_ports[i]}", flush=True)
        urls = [f"http://127.0.0.1:{port}/metrics" for port in metrics_ports]
        wait_until(lambda: _assigned(urls) == SHARDS, 90, message=f"the {SHARDS} shards to be assigned")
        scraper = scraper_class(urls, interval, time.monotonic())
        scraper.start()
        try:
            threads.append(producer(procs[0].bootstrap, topic, stop))
            for g in range(3):
                for c in range(3):
                    threads.append(_consumer(procs[(g + c) % INSTANCES].bootstrap, topic, f"dash-{run_id}-g{g}", stop))
            events = [(0.3, "kill -9 kcoord-1", lambda: procs[1].process.kill()),
                      (0.5, "restart kcoord-1", lambda: _restart(procs[1])),
                      (0.7, "SIGTERM kcoord-2 (scale-down)", lambda: procs[2].stop()),
                      (0.85, "restart kcoord-2", lambda: _restart(procs[2]))]
            next_report = 0.0
            while (elapsed := time.monotonic() - scraper.t0) < seconds:
                while events and events[0][0] * seconds <= elapsed:
                    _, what, action = events.pop(0)
                    print(f"[{elapsed:5.1f}s] {what}", flush=True)
                    action()
                if elapsed >= next_report:
                    print(f"[{elapsed:5.1f}/{seconds:.0f}s] scrapes {len(scraper.store.scrape_times)} "
                          f"(failed {len(scraper.failures)})", flush=True)
                    next_report += 5
                scraper.done.wait(0.2)
        finally:
            scraper.done.set()
            scraper.join(5)
    finally:
        stop.set()
        for t in threads:
            t.join(15)
        for p in procs:
            if p.process is not None and p.process.poll() is None:
                p.stop()
        kafka.stop()
    shutil.rmtree(work, ignore_errors=True)     # kept above when the run fails: its logs say why
    note = (f"Three kcoord processes (--instance-id kcoord-0..2, {SHARDS} state partitions, --config "
            f"{' '.join(CONFIG)}) in front of Apache Kafka {KAFKA_44}; 9 librdkafka KIP-848 consumers in 3 "
            f"groups and a producer; kcoord-1 killed (SIGKILL) at {0.3 * seconds:.0f}s and restarted at "
            f"{0.5 * seconds:.0f}s, kcoord-2 stopped (SIGTERM) at {0.7 * seconds:.0f}s and restarted at "
            f"{0.85 * seconds:.0f}s. Scraped every {interval:g}s for {seconds:g}s.")
    return scraper, note


def _restart(process) -> None:
    if process.process is not None and process.process.poll() is None:
        process.stop()
    process.process.wait(10)
    process.start(timeout=90)


def _assigned(urls: list[str]) -> int:
    """Shards assigned across the instances (kcoord_cluster_shards), 0 while one does not answer."""
    import urllib.request

    total = 0
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return 0
        line = next((x for x in text.splitlines() if x.startswith("kcoord_cluster_shards ")), None)
        if line is None:
            return 0
        total += int(float(line.split()[1]))
    return total
