"""Server-side assignor benchmark, after Kafka's JMH `ServerSideAssignorBenchmark`.

    .venv/bin/python bench/bench_assignor.py [--runs N] [--topics T] [--only SUBSTRING]

Scenarios (members x partitions-per-member, T topics, partitions per topic =
members * ratio / T, no racks):
- FULL: no previous assignment.
- INCREMENTAL: assign M-1 members, then add "newMember" (subscribed like member M-2, as
  Kafka's benchmark does) and time the second assignment.
- HOMOGENEOUS: every member subscribes to every topic. HETEROGENEOUS: members and topics
  split into 5 buckets (Kafka's MAX_BUCKET_COUNT); a bucket's members subscribe to the
  bucket's topics.

Timed: `assignor.assign(spec, describer)` only. Building the GroupSpec (and, for
INCREMENTAL, the first assignment) is excluded. A full `gc.collect()` runs before each
timed run; the collector stays enabled during it. Prints wall-clock median and min-max
and CPU-time (time.process_time) median and min in ms; on a shared machine the CPU time
is the steadier figure.
"""
from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from coordinator.group.assignors import (  # noqa: E402
    ASSIGNORS,
    GroupSpec,
    MappingTopicDescriber,
    MemberSubscription,
    SubscriptionType,
)

BUCKETS = 5
GRID = [(10_000, 50), (10_000, 10), (1_000, 50)]


def build(members: int, ratio: int, topic_count: int, subscription_type: SubscriptionType,
          assignor_name: str, incremental: bool):
    per_topic = members * ratio // topic_count
    rng_topics = [uuid.UUID(int=(i * 0x9E3779B97F4A7C15 + 1) % (1 << 128)) for i in range(topic_count)]
    describer = MappingTopicDescriber({t: per_topic for t in rng_topics})
    count = members - 1 if incremental else members
    subscriptions: dict[str, MemberSubscription] = {}
    if subscription_type is SubscriptionType.HOMOGENEOUS:
        everything = frozenset(rng_topics)
        for i in range(count):
            subscriptions[f"member{i}"] = MemberSubscription(None, None, everything)
    else:
        buckets = min(BUCKETS, count)
        topics_per_bucket = math.ceil(topic_count / buckets)
        members_per_bucket = math.ceil(count / buckets)
        for bucket in range(buckets):
            topics = frozenset(rng_topics[bucket * topics_per_bucket:(bucket + 1) * topics_per_bucket])
            for i in range(bucket * members_per_bucket, min((bucket + 1) * members_per_bucket, count)):
                subscriptions[f"member{i}"] = MemberSubscription(None, None, topics)
    spec = GroupSpec(subscriptions, subscription_type, {})
    if incremental:
        first = ASSIGNORS[assignor_name].assign(spec, describer)
        new_topics = subscriptions[f"member{members - 2}"].subscribed_topic_ids
        subscriptions = dict(subscriptions)
        subscriptions["newMember"] = MemberSubscription(None, None, new_topics)
        spec = GroupSpec(subscriptions, subscription_type, first)
    return spec, describer


def measure(spec, describer, assignor_name: str, runs: int) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU (process) times in ms of `runs` assignments."""
    assignor = ASSIGNORS[assignor_name]
    assignor.assign(spec, describer)  # warm-up
    wall, cpu = [], []
    for _ in range(runs):
        gc.collect()
        cpu_start = time.process_time()
        start = time.perf_counter()
        assignor.assign(spec, describer)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - cpu_start) * 1000)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--only", default="", help="run only scenarios whose label contains this")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {args.runs} runs each, {args.topics} topics; "
          "GroupSpec build excluded")
    print(f"{'scenario':<46} {'wall median':>11} {'wall min-max':>15} "
          f"{'cpu median':>10} {'cpu min':>8}  (ms)")
    for assignor_name in ("uniform", "range"):
        for subscription_type in (SubscriptionType.HOMOGENEOUS, SubscriptionType.HETEROGENEOUS):
            for incremental in (False, True):
                for members, ratio in GRID:
                    label = (f"{assignor_name} {subscription_type.name} "
                             f"{'INCREMENTAL' if incremental else 'FULL'} {members}x{ratio}")
                    if args.only and args.only not in label:
                        continue
                    spec, describer = build(members, ratio, args.topics, subscription_type,
                                            assignor_name, incremental)
                    wall, cpu = measure(spec, describer, assignor_name, args.runs)
                    print(f"{label:<46} {statistics.median(wall):>11.2f} "
                          f"{min(wall):>7.2f}-{max(wall):<7.2f} {statistics.median(cpu):>10.2f} "
                          f"{min(cpu):>8.2f}", flush=True)


if __name__ == "__main__":
    main()
