"""Join storm: time for N simulated KIP-848 members joining one group at once to be STABLE.

    .venv/bin/python bench/bench_join_storm.py [--members 1000] [--partitions 2000]
        [--configs "default;fixed-5000;fixed-1000;fixed-500"] [--runs 3] [--in-process]
        [--rtt-ms 0.3] [--members-per-connection 1] [--profile PREFIX] [--repo PATH]

Over the wire (default): a Tansu broker with one topic of ``--partitions`` partitions and
a fresh `kcoord serve` per run. ``--members`` simulated consumers (bench/loadgen,
behaving like the Java and librdkafka clients: join with epoch 0 and empty owned
partitions, heartbeat every HeartbeatIntervalMs of the latest response, revoke at once
and acknowledge with a heartbeat reporting the owned partitions in full) each open a
connection, then all send their join in one pass of the loop. Measured: from the first
join sent to the response after which every member has the same member epoch and the
members together own every partition exactly once (the members' own view; the
coordinator never gives a partition to two members); a ConsumerGroupDescribe then
confirms the group is Stable at that assignment epoch.

``--in-process``: the same members drive the sans-IO shard directly (no sockets, no
state topic) with a simulated clock and a fixed round trip of ``--rtt-ms``: the protocol's
intrinsic rounds without CPU contention. CPU time of the simulation is reported too.

Config sets: ``default`` is kcoord's defaults (adaptive heartbeat interval); ``fixed-N``
is Kafka's fixed policy with group.consumer.heartbeat.interval.ms = N. "Intervals" are
the time divided by the heartbeat interval (the stable interval for ``default``). The
target is <= 2 intervals + 100 ms.
"""
from __future__ import annotations

import argparse
import asyncio
import heapq
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadgen import procs  # noqa: E402
from loadgen.client import KafkaConnection, MemberDriver  # noqa: E402
from loadgen.consumer_member import ConsumerMember  # noqa: E402
from loadgen.groups import StabilityTracker, confirmed_stable, describe_groups  # noqa: E402
from loadgen.profiling import Profile  # noqa: E402

TOPIC = "bench-storm"
GROUP = "storm"


def config_items(name: str) -> tuple[tuple[str, ...], int]:
    """(kcoord --config items, the heartbeat interval the result is expressed in).
    A set may add settings after commas: "default,consumer_assignment_interval_ms=1000"."""
    from coordinator.config import CoordinatorConfig
    if "," in name:
        base, *extra = name.split(",")
        items, interval = config_items(base)
        return items + tuple(extra), interval
    if name == "default":
        return (), CoordinatorConfig().consumer_heartbeat_stable_interval_ms
    if name.startswith("fixed-"):
        ms = int(name.split("-", 1)[1])
        return (("consumer_heartbeat_policy=fixed", f"consumer_heartbeat_interval_ms={ms}",
                 f"consumer_min_heartbeat_interval_ms={min(ms, 5000)}"), ms)
    raise SystemExit(f"unknown config set {name!r}")


def target_ms(interval: int) -> int:
    return 2 * interval + 100


# --------------------------------------------------------------------- over the wire
async def storm_over_wire(port: int, args) -> dict:
    members = [ConsumerMember(GROUP, (TOPIC,)) for _ in range(args.members)]
    tracker = StabilityTracker(members, args.partitions)
    n_conns = max(1, -(-args.members // args.members_per_connection))
    conns = [await KafkaConnection.open("127.0.0.1", port) for _ in range(n_conns)]
    admin = await KafkaConnection.open("127.0.0.1", port)
    timeline: dict[str, float] = {}
    joined: set[int] = set()
    join_times: list[float] = []
    epochs_first_seen: dict[int, float] = {}

    def observe(member: ConsumerMember, response, now: float) -> None:
        tracker.observe(member, response, now)
        if member.joined and id(member) not in joined:
            joined.add(id(member))
            join_times.append(now - t0)
            if len(joined) == len(members):
                timeline["all joined"] = now
        epochs_first_seen.setdefault(member.member_epoch, now)

    driver = MemberDriver(conns, members, observe)
    cpu0 = time.process_time()
    t0 = time.monotonic()
    driver.start()
    deadline = t0 + args.timeout
    result: dict = {}
    while not result:
        if time.monotonic() > deadline:
            raise TimeoutError(f"not STABLE after {args.timeout}s: epochs {dict(tracker.epochs)}, "
                               f"owned {tracker.owned_total}/{args.partitions}")
        # Right after the joins the members' view looks settled at an early epoch (the
        # first joiner owns everything, the others were given nothing yet). Every join
        # bumps the group epoch once and a group starts at epoch 1 (KAFKA-20268), so the
        # storm is over when the view is settled at epoch N + 1. ConsumerGroupDescribe
        # confirms it afterwards; it is asked only then, because describing a large group
        # blocks the coordinator for a long while (see docs/measurements/benchmarks.md).
        try:
            await asyncio.wait_for(tracker.event.wait(), 1.0)
        except asyncio.TimeoutError:
            pass
        tracker.event.clear()
        if not tracker.is_stable() or tracker.stable_epoch < len(members) + 1:
            continue
        stable_at, epoch = tracker.stable_at, tracker.stable_epoch
        (described,) = await describe_groups(admin, [GROUP])
        if stable_at is not None and tracker.stable_at == stable_at and confirmed_stable(described, epoch):
            result = {"ms": (stable_at - t0) * 1000, "epoch": epoch, "requests": driver.requests,
                      "revoked": sum(m.revocations for m in members),
                      "errors": sum(sum(m.errors.values()) for m in members),
                      "generator_cpu_s": time.process_time() - cpu0,
                      "join_p50_ms": 1000 * statistics.median(join_times),
                      "all_joined_ms": (timeline.get("all joined", t0) - t0) * 1000,
                      "target_seen_ms": (epochs_first_seen.get(epoch, t0) - t0) * 1000}
    driver.stop()
    for c in (*conns, admin):
        c.close()
    return result


def run_over_wire(args, config_name: str) -> list[dict]:
    items, interval = config_items(config_name)
    broker = procs.tansu()
    results = []
    try:
        procs.run(procs.create_topic("127.0.0.1", broker.port, TOPIC, args.partitions))
        for i in range(args.runs):
            kc = procs.Kcoord(broker.bootstrap, items, args.state_partitions, Path(args.repo)).start()
            try:
                time.sleep(1.5)    # the gateway's metadata view has the topic (refresh: 1 s)
                cpu0 = procs.cpu_seconds(kc.pid)
                if args.profile and i == 0:
                    with Profile(kc.pid, f"{args.profile}-{config_name}", args.profile_seconds):
                        r = procs.run(storm_over_wire(kc.port, args))
                else:
                    r = procs.run(storm_over_wire(kc.port, args))
                r["server_cpu_s"] = procs.cpu_seconds(kc.pid) - cpu0
            except BaseException:
                kc.print_log_tail()
                raise
            finally:
                kc.stop()
            r["intervals"] = r["ms"] / interval
            results.append(r)
            print(f"  run {i + 1}: {r['ms']:8.0f} ms = {r['intervals']:5.2f} intervals of {interval} ms "
                  f"(target {target_ms(interval)} ms)  epoch {r['epoch']}  heartbeats {r['requests']}  "
                  f"partitions revoked {r['revoked']}  errors {r['errors']}  kcoord CPU {r['server_cpu_s']:.2f}s  "
                  f"generator CPU {r['generator_cpu_s']:.2f}s")
            print(f"         joins answered: median {r['join_p50_ms']:.0f} ms, all at {r['all_joined_ms']:.0f} ms; "
                  f"first member at the final epoch at "
                  f"{r['target_seen_ms']:.0f} ms")
    finally:
        broker.stop()
    return results


# ------------------------------------------------------------------------ in process
def run_in_process(args, config_name: str) -> list[dict]:
    sys.path.insert(0, str(procs.REPO / "tests"))
    from unit.group.context import ShardContext, topic

    from coordinator.config import CoordinatorConfig
    items, interval = config_items(config_name)
    results = []
    for i in range(args.runs):
        config = CoordinatorConfig()
        for item in items:
            key, _, value = item.partition("=")
            setattr(config, key, type(getattr(config, key))(value))
        ctx = ShardContext(topic(TOPIC, args.partitions), config=config)
        members = [ConsumerMember(GROUP, (TOPIC,)) for _ in range(args.members)]
        tracker = StabilityTracker(members, args.partitions)
        rtt = args.rtt_ms
        t0 = float(ctx.now_ms)
        # (due time, sequence, member index): every member joins at t0
        due = [(t0, j, j) for j in range(len(members))]
        heapq.heapify(due)
        seq = len(members)
        sent = 0
        cpu0 = time.process_time()
        stable_ms = None
        while stable_ms is None:
            now, _, j = heapq.heappop(due)
            # Fire coordinator timers (assignment interval, ...) due before this send.
            ctx.advance(max(0, int(now) - ctx.now_ms))
            ctx.now_ms = max(ctx.now_ms, int(now))
            m = members[j]
            request = m.next_request() if not m.is_steady() else _steady_request(m)
            result = ctx.apply(ctx.shard.consumer_group_heartbeat(ctx.ctx(1), request, ctx.now_ms))
            sent += 1
            arrival = now + rtt
            at_once = m.on_response(result.response)
            tracker.observe(m, result.response, arrival)
            group = ctx.group(GROUP)
            if tracker.stable_at is not None and group.state.value == "Stable" \
                    and group.assignment_epoch == tracker.stable_epoch:
                stable_ms = tracker.stable_at - t0
                break
            nxt = arrival if at_once else now + m.heartbeat_interval_ms
            heapq.heappush(due, (nxt, seq, j))
            seq += 1
            if now - t0 > args.timeout * 1000:
                raise TimeoutError("in-process storm did not settle")
        cpu = time.process_time() - cpu0
        r = {"ms": stable_ms, "intervals": stable_ms / interval, "requests": sent,
             "epoch": tracker.stable_epoch, "cpu_s": cpu,
             "revoked": sum(m.revocations for m in members)}
        results.append(r)
        print(f"  run {i + 1}: {r['ms']:8.0f} ms simulated = {r['intervals']:5.2f} intervals of {interval} ms "
              f"(target {target_ms(interval)} ms)  epoch {r['epoch']}  heartbeats {sent}  "
              f"partitions revoked {r['revoked']}  CPU {cpu:.2f}s")
    return results


def _steady_request(member: ConsumerMember):
    from datetime import timedelta

    from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
    return ConsumerGroupHeartbeatRequest(group_id=member.group_id, member_id=member.member_id,
                                         member_epoch=member.member_epoch,
                                         rebalance_timeout=timedelta(milliseconds=-1), topic_partitions=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--configs", default="default;fixed-5000;fixed-1000;fixed-500")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--rtt-ms", type=float, default=0.3, help="round trip in the in-process simulation")
    parser.add_argument("--members-per-connection", type=int, default=1)
    parser.add_argument("--state-partitions", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--profile", default=None, help="py-spy the first run of each config: output prefix")
    parser.add_argument("--profile-seconds", type=float, default=6.0)
    parser.add_argument("--repo", default=str(procs.REPO))
    args = parser.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    print(f"members={args.members} partitions={args.partitions} runs={args.runs} cpus={os.cpu_count()} "
          f"{'in-process rtt=' + str(args.rtt_ms) + 'ms' if args.in_process else 'over the wire'} repo={args.repo}")
    for name in args.configs.split(";"):
        items, interval = config_items(name)
        print(f"config {name}: {' '.join(items) or '(kcoord defaults)'}")
        runs = run_in_process(args, name) if args.in_process else run_over_wire(args, name)
        ms = [r["ms"] for r in runs]
        med = statistics.median(ms)
        print(f"  median {med:.0f} ms (min {min(ms):.0f}, max {max(ms):.0f}, n={len(ms)}) = {med / interval:.2f} "
              f"intervals; target {target_ms(interval)} ms: {'met' if med <= target_ms(interval) else 'MISSED'}")


if __name__ == "__main__":
    main()
