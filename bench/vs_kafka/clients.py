"""Real-client figures, the same clients against Kafka's coordinator and against kcoord.

- ``join_11th``: ten librdkafka consumers (group.protocol=consumer, one OS process each,
  migration/rehearse/rdkafka_member.py) consume a 22-partition topic fed at ``rate``
  records/s; an 11th subscribes (bench/rebalance/scenarios.py ``run_join``). Figures: the
  new member's first record after its subscribe(), the time to a stable complete disjoint
  balanced assignment, the longest time nobody in the group consumed, and the longest
  pause of the members that kept their partitions (during the rebalance) against the
  longest pause any member had in the 5 s before the join (the steady fetch rhythm).
- ``formation``: ten librdkafka consumers, connected and with the topic's metadata, all
  subscribe at once ("go"); time from the first subscribe() until every partition of a
  20-partition topic is assigned once and evenly (``run_formation``).
- ``consume_rate``: one confluent-kafka consumer with assign() (no group) reads
  ``records`` records of ``size`` bytes from the beginning of a topic, directly from
  Kafka and through kcoord (which forwards Fetch and answers Metadata with its own
  listeners): records/s and MB/s from the first record to the last.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from rebalance.scenarios import Target, run_formation, run_join

JOINER = "new"     # run_join's name of the 11th member


@dataclass(frozen=True)
class JoinerDebugTarget(Target):
    """A Target whose 11th member alone logs librdkafka's ``debug`` contexts (e.g.
    "cgrp,fetch,protocol,broker") to its stderr file: the ten others are not slowed by their
    logging, so the join is timed as without it, and the joiner's requests get wall-clock stamps
    (bench/side_by_side/join_phases.py reads them)."""

    joiner_debug: str = ""

    def argv(self, topic: str, group: str, name: str, wait_go: bool = False) -> list[str]:
        if name == JOINER and self.joiner_debug:
            plain = Target(self.label, self.bootstrap, self.protocol, self.client, self.assignor,
                           self.session_timeout_ms, self.heartbeat_interval_ms, self.debug,
                           (*self.props, ("debug", self.joiner_debug)))
            return plain.argv(topic, group, name, wait_go)
        return super().argv(topic, group, name, wait_go)


def consumer_target(label: str, bootstrap: str, joiner_debug: str = "") -> Target:
    if joiner_debug:
        return JoinerDebugTarget(label, bootstrap, protocol="consumer", joiner_debug=joiner_debug)
    return Target(label, bootstrap, protocol="consumer")


def classic_target(label: str, bootstrap: str) -> Target:
    # The baseline's classic settings (session 6000 / heartbeat 2000), eager range.
    return Target(label, bootstrap, protocol="classic", assignor="range")


def join_11th(target: Target, *, partitions: int, rate: float, before_s: float, after_s: float,
              log_dir: Path) -> dict[str, Any]:
    run = run_join(target, partitions=partitions, rate=rate, before_s=before_s, after_s=after_s, log_dir=log_dir)
    f = run.figures
    paused, unaffected = f.unaffected_paused()
    return {
        "first_record_s": f.first_record_s,
        "first_partition_s": f.first_partition_s,
        "stable_s": f.stable_s,
        "nobody_consumed_after_s": f.group_gap_after_s,
        "nobody_consumed_before_s": f.group_gap_before_s,
        "kept_partitions_longest_pause_s": f.worst_gap_during_rebalance(affected=False),
        "gave_up_partitions_longest_pause_s": f.worst_gap(affected=True),
        "longest_pause_before_join_s": f.worst_gap_before(),
        "kept_partitions_paused_beyond_steady": [paused, unaffected],
        "longest_record_delay_s": f.max_record_delay_s,
        "members": [asdict(m) for m in f.members],
        # The joiner's subscribe() on the wall clock (librdkafka's debug stamps) and its log.
        "t_join_wall": run.t_join / 1e9 + (time.time() - time.monotonic()),
        "joiner_log": str(run.member_logs.get(JOINER, "")),
    }


def formation(target: Target, *, partitions: int, log_dir: Path) -> dict[str, Any]:
    run = run_formation(target, partitions=partitions, log_dir=log_dir)
    return {"from_first_subscribe_s": run.from_first_subscribe_s, "from_last_subscribe_s": run.from_last_subscribe_s}


def produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    """Fill ``topic`` (directly on Kafka); returns records/s of the producer (not compared)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "acks": 1})
    value = b"x" * size
    t0 = time.monotonic()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, key=str(i).encode())
                break
            except BufferError:
                p.poll(0.01)
        if i % 10_000 == 0:
            p.poll(0)
    left = p.flush(120)
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return records / (time.monotonic() - t0)


def consume_rate(bootstrap: str, topic: str, partitions: int, records: int, timeout: float = 120.0) -> dict[str, Any]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"vsk-consume-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got, nbytes, first = 0, 0, None
        t0 = time.monotonic()
        while got < records:
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"consumed {got}/{records} in {timeout}s")
            for m in c.consume(10_000, 0.5):
                if m.error() is not None:
                    continue
                if first is None:
                    first = time.monotonic()
                got += 1
                nbytes += len(m.value() or b"")
        end = time.monotonic()
    finally:
        c.close()
    span = max(end - (first or t0), 1e-9)
    return {"records": got, "seconds": span, "records_per_s": got / span, "mb_per_s": nbytes / span / 1e6,
            "first_record_after_s": (first or end) - t0}
