"""One librdkafka (confluent-kafka) group member as its own OS process.

    python -m migration.rehearse.rdkafka_member --bootstrap H:P --topic T --group G \
        --group-protocol classic|consumer [--client-id ID] [--session-timeout-ms N]
        [--heartbeat-interval-ms N] [--assignor S] [--prop key=value]... [--wait-go]
        [--poll-timeout S]

It prints the same JSON-line events as the Java ConsumerDriver (java/ConsumerDriver.java),
so the rehearsal reads both clients one way: ready, assigned, revoked, lost, record,
committed, error, closed; "t" is CLOCK_MONOTONIC ns (time.monotonic_ns(), the clock
Java's System.nanoTime() reads on Linux). A first "clock" event pairs that clock with
wall-clock time, so librdkafka's own debug log (``--prop debug=cgrp``, wall-clock stamps)
can be put on the same time line. It stops cleanly (commit, close: revoke and leave the
group) on the stdin line "close" or at EOF.

``--wait-go`` (bench/bench_rebalance.py): build the consumer, fetch the topic's metadata so
it is connected, print "waiting", then subscribe only on the stdin line "go", so a group
formation can be timed from subscribe() alone.

Offsets are committed synchronously after every consumed batch and on revocation, so
a committed offset never trails what this member has reported as consumed.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

# KIP-848 moves these to the coordinator: librdkafka refuses them with group.protocol=consumer.
CLASSIC_ONLY = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")
_out_lock = threading.Lock()


def emit(kind: str, t_ns: int | None = None, flush: bool = True, **fields: Any) -> None:
    line = json.dumps({"t": time.monotonic_ns() if t_ns is None else t_ns, "event": kind, **fields})
    with _out_lock:
        sys.stdout.write(line + "\n")
        if flush:
            sys.stdout.flush()


def consumer_config(args: argparse.Namespace) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "group.protocol": args.group_protocol,
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.partition.eof": False,
    }
    if args.client_id:
        conf["client.id"] = args.client_id
    if args.group_protocol == "classic":
        conf["session.timeout.ms"] = args.session_timeout_ms
        conf["heartbeat.interval.ms"] = args.heartbeat_interval_ms
        if args.assignor:
            conf["partition.assignment.strategy"] = args.assignor
    for kv in args.prop or ():
        key, sep, value = kv.partition("=")
        if not sep or not key:
            raise SystemExit(f"--prop expects key=value, got {kv!r}")
        if args.group_protocol == "consumer" and key in CLASSIC_ONLY:
            raise SystemExit(f"--prop {key}: librdkafka rejects it with group.protocol=consumer (KIP-848)")
        conf[key] = value
    return conf


class Member:
    def __init__(self, args: argparse.Namespace) -> None:
        self.conf = consumer_config(args)
        self.topic = args.topic
        # The consumer protocol is always incremental; classic is too with cooperative-sticky.
        self.incremental = args.group_protocol == "consumer" or "cooperative" in str(
            self.conf.get("partition.assignment.strategy", ""))
        self.wait_go = args.wait_go
        self.poll_timeout = args.poll_timeout
        self.go = threading.Event()
        self.closing = threading.Event()
        self.consumer: Consumer | None = None

    def run(self) -> int:
        threading.Thread(target=self._watch_stdin, daemon=True).start()
        consumer = Consumer({**self.conf, "error_cb": self._on_error})
        self.consumer = consumer
        emit("clock", wall=time.time())
        if self.wait_go:
            consumer.list_topics(self.topic, timeout=10)
            emit("waiting")
            self.go.wait()
        consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                           on_lost=self._on_lost)
        emit("ready", protocol=self.conf["group.protocol"], group=self.conf["group.id"])
        while not self.closing.is_set():
            batch = consumer.consume(500, self.poll_timeout)
            consumed = False
            for m in batch:
                if m.error() is not None:
                    err = m.error()
                    emit("error", error=err.name(), message=err.str(), fatal=err.fatal())
                    continue
                consumed = True
                value = m.value()
                emit("record", flush=False, topic=m.topic(), partition=m.partition(), offset=m.offset(),
                     value=value.decode(errors="replace") if value is not None else None)
            if consumed:
                sys.stdout.flush()
                self._commit("batch")
        self._commit("close")
        consumer.close()  # revokes through _on_revoke, then leaves the group
        emit("closed")
        return 0

    def _watch_stdin(self) -> None:
        try:
            for line in sys.stdin:
                word = line.strip()
                if word == "go":
                    self.go.set()
                elif word in ("close", "leave"):
                    break
        finally:
            self.closing.set()  # EOF too: the parent is gone
            self.go.set()

    def _commit(self, reason: str) -> None:
        assert self.consumer is not None
        try:
            committed = self.consumer.commit(asynchronous=False)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.code() != KafkaError._NO_OFFSET:  # nothing new since the last commit
                emit("error", error=err.name(), message=f"commit on {reason}: {err.str()}", fatal=err.fatal())
            return
        rows = [[p.topic, p.partition, p.offset] for p in committed or [] if p.offset >= 0]
        if rows:
            emit("committed", reason=reason, offsets=rows)

    def _on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        t_ns = time.monotonic_ns()
        if self.incremental:
            consumer.incremental_assign(parts)
        else:
            consumer.assign(parts)
        emit("assigned", t_ns, partitions=[[p.topic, p.partition] for p in parts], member_id=consumer.memberid())

    def _on_revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        # Commit before giving the partitions up, so the next owner starts where we stopped.
        if parts:
            self._commit("revoke")
        if self.incremental:
            consumer.incremental_unassign(parts)
        else:
            consumer.unassign()
        emit("revoked", partitions=[[p.topic, p.partition] for p in parts])

    def _on_lost(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        # Already someone else's: committing now could overwrite the new owner's progress.
        if self.incremental:
            consumer.incremental_unassign(parts)
        else:
            consumer.unassign()
        emit("lost", partitions=[[p.topic, p.partition] for p in parts])

    @staticmethod
    def _on_error(err: KafkaError) -> None:
        emit("error", error=err.name(), message=err.str(), fatal=err.fatal())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="rdkafka_member", description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic")
    ap.add_argument("--client-id", default=None)
    ap.add_argument("--session-timeout-ms", type=int, default=10_000)
    ap.add_argument("--heartbeat-interval-ms", type=int, default=1_000)
    ap.add_argument("--assignor", default=None, help="classic partition.assignment.strategy")
    ap.add_argument("--prop", action="append", metavar="KEY=VALUE")
    ap.add_argument("--wait-go", action="store_true", help='subscribe only on the stdin line "go"')
    ap.add_argument("--poll-timeout", type=float, default=0.1, help="consume() timeout, seconds")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    member = Member(parse_args(argv))
    try:
        return member.run()
    except Exception as exc:  # reported as a fatal event, like the Java driver
        emit("error", error=type(exc).__name__, message=str(exc), fatal=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
