"""Failover of a kcoord cluster (issue 14 point 6): kill -9 one of three `kcoord serve
--instance-id` processes in front of Apache Kafka 4.4 while groups commit, and time until
every group of its shards is answered again by a survivor.

    .venv/bin/python bench/bench_failover.py [--sessions 2000,6000] [--runs 3] [--groups 48]
        [--shards 12] [--committers 12] [--consumers 6] [--warmup 5] [--log-level INFO] [--verbose]

Set-up: one Kafka 4.4 node started from tests/support (the fixture's settings: its
group.min.session.timeout.ms is lowered to 1 s, so a 2 s membership session is accepted; 6 s
is Kafka's default minimum). For each membership session (``--sessions``, ms) and run, a
fresh state topic and three instances kc-0..2 (`--log-format json`); heartbeat a tenth of the
session, lease margin a third. ``--groups`` groups commit under load: ``--committers``
threads, each a committing member sending standalone OffsetCommits (generation -1) to each of
its groups' coordinator in turn over kept connections, for ``--warmup`` seconds before the
kill and on through the failover (following NOT_COORDINATOR with FindCoordinator). Besides
them, ``--consumers`` real librdkafka consumers (KIP-848), one group each, bootstrapping across
the instances, consume a topic fed every 5 ms and commit after each batch; reported: the time
until every one whose group moved has a commit acknowledged after the kill, and whether any
KIP-848 member lost its partitions (saw a rebalance: must be none, the failover being far
shorter than their session timeout).

Measured: the victim (kc-0, kc-1, kc-2 in turn) is killed with SIGKILL; every group its
shards coordinated is probed (FindCoordinator on a survivor, then OffsetFetch from the
named owner) until it answers without error with an offset at least the last commit
acknowledged before the kill. ``total`` = kill -> the last such group answered. The parts:
- detection: kill -> the broker starts the membership group's rebalance (Kafka's log line
  "Preparing to rebalance group kcoord.<state topic>"): the membership session timeout
  plus the broker's expiry check;
- rebalance: -> the last survivor applied its new assignment (kcoord INFO "generation N:
  serves K shards (+a -b)");
- fencing: -> the last moved shard was taken (INFO "state partition P taken": InitProducerId,
  which fences the dead owner's producer epoch and aborts its open transaction);
- load: -> the last probe group answered (replay of the shard's records, then the probe's
  own round trip, at most ~10 ms).
Reported per run and as medians per session. Target from the issue: total <= membership
session timeout + 3 s. Nothing is asserted: it prints figures. A commit acknowledged before
the kill and missing after it is reported as "lost" (must be 0).
"""
from __future__ import annotations

import argparse
import random
import re
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster.common import (  # noqa: E402
    cluster_config,
    commit,
    fetch,
    find,
    kafka_log,
    kcoord_log,
    median,
    start_instances,
    start_kafka44,
    stop_all,
    use_ports,
    wait_settled,
)

from support.wait import wait_until  # noqa: E402

RETRIABLE = {14, 15, 16}     # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
APPLIED = re.compile(r"generation (\d+): serves (\d+) shards \(\+(\d+) -(\d+)\)")
TAKEN = re.compile(r"state partition (\d+) taken")
LOADED = re.compile(r"shard (\d+) loaded")      # DEBUG (--log-level debug)


class Committers:
    """Committing members: each thread commits its groups round-robin to their coordinator,
    an increasing offset per group; acknowledged offsets are kept (with when)."""

    def __init__(self, groups: list[str], topic: str, owners: dict[str, int], alive: list[str], threads: int):
        self.topic = topic
        self.owners = dict(owners)
        self.alive = alive                       # bootstraps to ask FindCoordinator (updated by the caller)
        self.acked: dict[str, int] = {}
        self.sent = 0
        self.ok = 0
        self.errors = 0
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        slices = [groups[i::threads] for i in range(threads)]
        self.threads = [threading.Thread(target=self._run, args=(s,), daemon=True) for s in slices]

    def start(self) -> Committers:
        for t in self.threads:
            t.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(30)

    def _refresh(self, group: str) -> None:
        try:
            code, _, _, port = find(random.choice(self.alive), group)
            if code == 0:
                self.owners[group] = port
        except (OSError, AssertionError):
            pass

    def _run(self, groups: list[str]) -> None:
        socks: dict[int, socket.socket] = {}
        seq = {g: 0 for g in groups}
        while not self.stop_event.is_set():
            for g in groups:
                port = self.owners[g]
                try:
                    sock = socks.get(port)
                    if sock is None:
                        sock = socks[port] = socket.create_connection(("127.0.0.1", port), timeout=15)
                    offset = seq[g] + 1
                    code = commit(sock, g, self.topic, offset)
                except (OSError, AssertionError):     # the process is gone (or closed on us)
                    stale = socks.pop(port, None)
                    if stale is not None:
                        stale.close()
                    code = -1
                with self.lock:
                    self.sent += 1
                    if code == 0:
                        self.ok += 1
                        seq[g] = offset
                        self.acked[g] = offset
                    else:
                        self.errors += 1
                if code:
                    if code in RETRIABLE or code == -1:
                        self._refresh(g)
                    time.sleep(0.01)       # back off a little, as clients do
        for s in socks.values():
            s.close()


def probe_moved(moved: dict[str, int], topic: str, survivors: list[str], victim_port: int,
                timeout: float) -> tuple[dict[str, float], dict[str, tuple[int, int]]]:
    """Poll each moved group (a thread each, so one group's probe never waits for
    another's) until a survivor owns it and OffsetFetch answers without error; when each
    did (epoch s), and lost commits (an offset below the one acknowledged before the kill)."""
    answered: dict[str, float] = {}
    lost: dict[str, tuple[int, int]] = {}
    transitions.clear()
    deadline = time.monotonic() + timeout

    def probe(g: str, acked: int) -> None:
        seen = None
        while time.monotonic() < deadline:
            err = -1
            try:
                code, _, _, port = find(survivors[0], g)
                if code or port == victim_port:
                    what = f"FindCoordinator {code} port {port}"
                else:
                    err, offset = fetch(f"127.0.0.1:{port}", g, topic)
                    what = f"OffsetFetch from {port}: {err}"
            except (OSError, AssertionError) as e:
                what = type(e).__name__
            if seen != what:      # what the probe saw, when it changed (--verbose)
                seen = what
                transitions.append((time.time(), g, what))
            if what.startswith("OffsetFetch") and err == 0:
                answered[g] = time.time()
                if offset < acked:
                    lost[g] = (acked, offset)
                return
            time.sleep(0.005)

    threads = [threading.Thread(target=probe, args=item, daemon=True) for item in moved.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 30)
    return answered, lost


transitions: list[tuple[float, str, str]] = []


def one_run(kafka, session_ms: int, run: int, args) -> dict[str, float] | None:
    from support.admin import create_topic

    stamp = f"{int(time.time())}_{session_ms}_{run}"
    state, topic = f"__kc_bench_failover_{stamp}", f"bench-failover-{stamp}"
    create_topic(kafka.bootstrap, topic, 1)
    config = cluster_config(session_ms, fencing=args.fencing)
    procs = start_instances(kafka.bootstrap, state, 3, args.shards, config, log_level=args.log_level)
    try:
        groups = [f"bench-g-{i}" for i in range(args.groups)]
        owners = wait_settled(procs, groups)
        victim = procs[run % 3]
        survivors = [p for p in procs if p is not victim]
        alive = [p.bootstrap for p in procs]
        committers = Committers(groups, topic, owners, alive, args.committers).start()
        consumers, producer = start_consumers(kafka, procs, stamp, args.consumers)
        t0 = time.monotonic()
        # Warm up: every group has an acknowledged commit, then --warmup seconds of load.
        wait_until(lambda: len(committers.acked) == len(groups), 60, interval=0.1,
                   message="every group has a commit")
        # A duration of load, not a wait for a condition: the state topic fills meanwhile.
        while time.monotonic() - t0 < args.warmup:
            time.sleep(0.2)
        if consumers:
            wait_until(lambda: all(c.events("committed") for c in consumers), 60, interval=0.1,
                       message="every real consumer has committed")
        # The consumers whose group the victim coordinates (asked before the kill).
        moving_consumers = [c for c in consumers if find(procs[0].bootstrap, c.group)[3] == victim.port]
        with committers.lock:
            rate = committers.ok / max(1e-9, time.monotonic() - t0)
            moved = {g: committers.acked[g] for g, port in committers.owners.items() if port == victim.port}
        alive[:] = [p.bootstrap for p in survivors]
        t_kill = time.time()
        kill_ns = time.monotonic_ns()
        victim.kill()
        # Acknowledged after the snapshot but before the kill: also must survive.
        with committers.lock:
            moved = {g: max(off, committers.acked[g]) for g, off in moved.items()}
        answered, lost = probe_moved(moved, topic, [p.bootstrap for p in survivors], victim.port,
                                     session_ms / 1000 + 60)
        committers.stop()
        # Real consumers of moved groups: until each has a commit acknowledged after the kill.
        def recommitted(c) -> float | None:
            after_kill = [e["t"] for e in c.events("committed") if e["t"] > kill_ns]
            return (min(after_kill) - kill_ns) / 1e9 if after_kill else None

        try:
            wait_until(lambda: all(recommitted(c) is not None for c in moving_consumers), session_ms / 1000 + 60,
                       interval=0.05, message="the moved real consumers commit again")
        except AssertionError as e:
            print(f"  {e}", flush=True)
        again = [t for c in moving_consumers if (t := recommitted(c)) is not None]
        lost_events = sum(1 for c in consumers for e in c.events("lost") if e["t"] > kill_ns)
        fatal = sum(1 for c in consumers for e in c.errors() if e.get("fatal"))
        stop_consumers(consumers, producer)
        if len(answered) < len(moved):
            print(f"  run {run}: {len(moved) - len(answered)} of {len(moved)} moved groups never answered",
                  flush=True)
            return None
        t_done = max(answered.values())

        # The parts, from the broker's and the survivors' logs.
        group_name = f"kcoord.{state}"
        kafka_lines = [(t, m) for t, m in kafka_log(kafka.nodes[0].log_path, group_name) if t >= t_kill - 0.01]
        rebal = [t for t, m in kafka_lines if "Preparing to rebalance" in m]
        logs = [kcoord_log(p.log_path) for p in survivors]
        after = [(t, m) for lines in logs for t, m in lines if t >= t_kill]
        applied = [t for t, m in after if (a := APPLIED.search(m)) and int(a.group(3)) > 0]
        taken = [t for t, m in after if TAKEN.search(m)]
        loaded = [t for t, m in after if LOADED.search(m)]
        victim_led = any("leads generation" in m for _, m in kcoord_log(victim.log_path))
        t_detect = min(rebal) if rebal else float("nan")
        t_applied = max(applied) if applied else float("nan")
        t_taken = max(taken) if taken else float("nan")
        t_loaded = max(loaded) if loaded else float("nan")
        if args.verbose:
            for t, m in kafka_lines[:6]:
                print(f"    kafka +{t - t_kill:.3f}s {m[:160]}")
            for t, m in sorted(after)[:20]:
                print(f"    kcoord +{t - t_kill:.3f}s {m[:160]}")
            for t, g, what in transitions:
                print(f"    probe +{t - t_kill:.3f}s {g}: {what}")
        result = {
            "total": t_done - t_kill, "detection": t_detect - t_kill, "rebalance": t_applied - t_detect,
            "fencing": t_taken - t_applied, "load": t_done - t_taken, "groups": len(moved),
            "replay": t_loaded - t_taken, "answer": t_done - t_loaded,
            "consumers_again": max(again) if again else float("nan"), "consumers_moved": float(len(again)),
            "consumers_lost": float(lost_events), "consumers_fatal": float(fatal),
            "shards": len(taken), "lost": len(lost), "rate": rate, "errors": committers.errors,
            "leader": 1.0 if victim_led else 0.0}
        led = " (had led the membership group)" if victim_led else ""
        print(f"  session {session_ms} ms run {run}: victim kc-{run % 3}{led}, "
              f"{len(moved)} groups on {len(taken)} shards moved; total {result['total']:.2f}s = detection "
              f"{result['detection']:.2f} + rebalance {result['rebalance']:.2f} + fencing {result['fencing']:.2f}"
              f" + load {result['load']:.2f}"
              + (f" (replay {result['replay']:.2f}, then first answer {result['answer']:.2f})" if loaded else "")
              + f"; {rate:.0f} commits/s before the kill, lost {len(lost)}"
              + (f"; real consumers of moved groups ({len(again)}/{len(moving_consumers)}) commit again after "
                 f"{result['consumers_again']:.2f}s (max), KIP-848 members that saw a rebalance (lost "
                 f"partitions): {lost_events}, fatal errors {fatal}" if consumers else ""), flush=True)
        return result
    finally:
        stop_all(procs)


def start_consumers(kafka, procs, stamp: str, n: int):
    """``n`` real librdkafka consumers (KIP-848), each in its own group, member i
    bootstrapping on instance i % 3, consuming a 3-partition topic a producer feeds every
    5 ms (straight to Kafka) and committing after each batch (synchronously)."""
    if n <= 0:
        return [], None
    from support.admin import create_topic
    from support.produce import BackgroundProducer
    from support.rdkafka import RdkafkaConsumer

    data = f"bench-failover-data-{stamp}"
    create_topic(kafka.bootstrap, data, 3)
    producer = BackgroundProducer(kafka.bootstrap, data, interval=0.005).start()
    consumers = [RdkafkaConsumer(procs[i % len(procs)].bootstrap, data, f"bench-rc-{stamp}-{i}",
                                 member=f"rc{i}", group_protocol="consumer").start(timeout=60)
                 for i in range(n)]
    return consumers, producer


def stop_consumers(consumers, producer) -> None:
    for c in consumers:
        c.shutdown()
    if producer is not None:
        producer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", default="2000,6000", help="membership session timeouts, ms")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--groups", type=int, default=48)
    parser.add_argument("--shards", type=int, default=12, help="state-topic partitions")
    parser.add_argument("--committers", type=int, default=12, help="committing threads")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of load before the kill")
    parser.add_argument("--consumers", type=int, default=6,
                        help="real librdkafka consumers (KIP-848), one group each, besides the committers")
    parser.add_argument("--fencing", default="epoch", choices=["epoch", "transactional", "none"])
    parser.add_argument("--log-level", default="INFO",
                        help="kcoord's; DEBUG adds 'shard N loaded', which splits load into replay and answer")
    parser.add_argument("--verbose", action="store_true", help="print the log lines the parts come from")
    args = parser.parse_args()
    use_ports()
    sessions = [int(s) for s in args.sessions.split(",")]
    kafka = start_kafka44("bench-failover-")
    rows = []
    try:
        for session_ms in sessions:
            results = []
            for run in range(args.runs):
                print(f"session {session_ms} ms, run {run + 1}/{args.runs} ...", flush=True)
                r = one_run(kafka, session_ms, run, args)
                if r is not None:
                    results.append(r)
            if not results:
                rows.append(f"| {session_ms / 1000:g} s | 0 of {args.runs} runs completed | | | | | | | |")
                continue
            m = {k: median(r[k] for r in results) for k in results[0]}
            rows.append(f"| {session_ms / 1000:g} s | {len(results)} | {m['total']:.2f} s "
                        f"(target {session_ms / 1000 + 3:g} s) | {m['detection']:.2f} | {m['rebalance']:.2f} | "
                        f"{m['fencing']:.2f} | {m['load']:.2f} | {m['groups']:.0f} groups / {m['shards']:.0f} shards,"
                        f" {m['rate']:.0f} commits/s, lost {sum(r['lost'] for r in results):.0f} | "
                        f"{m['consumers_again']:.2f} s ({sum(r['consumers_moved'] for r in results):.0f} moved), "
                        f"rebalances seen {sum(r['consumers_lost'] for r in results):.0f}, fatal "
                        f"{sum(r['consumers_fatal'] for r in results):.0f} |")
    finally:
        kafka.stop()
    print("\n| membership session | runs | kill -> every moved group answered (median) | detection s | "
          "rebalance s | fencing s | load s | load | real consumers of moved groups: commit again (median of "
          "max) |\n|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
