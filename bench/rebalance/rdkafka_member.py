"""One librdkafka (confluent-kafka) consumer as its own OS process, for the rebalance benchmark.

    python bench/rebalance/rdkafka_member.py --bootstrap H:P --topic T --group G
        [--group-protocol classic|consumer] [--assignor range|cooperative-sticky]
        [--session-timeout-ms N] [--heartbeat-interval-ms N] [--wait-go] [--prop key=value]...

Prints the JSON-line events of tests/support/consumer_events.py (ready, assigned, revoked,
lost, record, committed, error, closed; "t" = CLOCK_MONOTONIC ns), plus one "clock" event
pairing monotonic and wall-clock time, so librdkafka's own debug log (stderr, wall-clock
stamps; ``--prop debug=cgrp``) can be put on the same time line.

One process per member, as in the Tansu baseline (performance-baselines.md): eleven
consumers as threads of one Python process would share one GIL, and the stalls measured
would partly be the GIL's.

``--wait-go``: build the consumer (it bootstraps and connects), then wait for the stdin line
"go" before subscribe(), so a group formation can be timed from subscribe() alone.
The stdin line "close" (or EOF) stops cleanly: commit, close (revoke, leave the group).
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

_out = threading.Lock()


def emit(kind: str, t_ns: int | None = None, flush: bool = True, **fields: Any) -> None:
    line = json.dumps({"t": time.monotonic_ns() if t_ns is None else t_ns, "event": kind, **fields})
    with _out:
        sys.stdout.write(line + "\n")
        if flush:
            sys.stdout.flush()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic")
    ap.add_argument("--assignor", default=None, help="classic partition.assignment.strategy")
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-interval-ms", type=int, default=2000)
    ap.add_argument("--client-id", default=None)
    ap.add_argument("--wait-go", action="store_true")
    ap.add_argument("--prop", action="append", default=[], metavar="KEY=VALUE")
    return ap.parse_args(argv)


def config(args: argparse.Namespace) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": args.bootstrap, "group.id": args.group,
                            "group.protocol": args.group_protocol, "auto.offset.reset": "earliest",
                            "enable.auto.commit": False, "enable.partition.eof": False}
    if args.client_id:
        conf["client.id"] = args.client_id
    if args.group_protocol == "classic":  # KIP-848 members take these from the coordinator
        conf["session.timeout.ms"] = args.session_timeout_ms
        conf["heartbeat.interval.ms"] = args.heartbeat_interval_ms
        if args.assignor:
            conf["partition.assignment.strategy"] = args.assignor
    for kv in args.prop:
        key, sep, value = kv.partition("=")
        if not sep:
            raise SystemExit(f"--prop expects key=value, got {kv!r}")
        conf[key] = value
    return conf


class Member:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.conf = config(args)
        self.incremental = args.group_protocol == "consumer" or "cooperative" in str(
            self.conf.get("partition.assignment.strategy", ""))
        self.go = threading.Event()
        self.closing = threading.Event()

    def run(self) -> int:
        threading.Thread(target=self._watch_stdin, daemon=True).start()
        consumer = Consumer({**self.conf, "error_cb": self._on_error})
        emit("clock", wall=time.time())
        if self.args.wait_go:
            consumer.list_topics(self.args.topic, timeout=10)  # connected and bootstrapped before "go"
            emit("waiting")
            self.go.wait()
        consumer.subscribe([self.args.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                           on_lost=self._on_lost)
        emit("ready", protocol=self.args.group_protocol)
        while not self.closing.is_set():
            got = False
            for m in consumer.consume(500, 0.05):
                err = m.error()
                if err is not None:
                    emit("error", error=err.name(), message=err.str(), fatal=err.fatal())
                    continue
                got = True
                value = m.value()
                emit("record", flush=False, topic=m.topic(), partition=m.partition(), offset=m.offset(),
                     value=value.decode(errors="replace") if value is not None else None)
            if got:
                sys.stdout.flush()
                self._commit(consumer, "batch")
        self._commit(consumer, "close")
        consumer.close()  # revokes through _on_revoke, then leaves the group
        emit("closed")
        return 0

    def _watch_stdin(self) -> None:
        for line in sys.stdin:
            word = line.strip()
            if word == "go":
                self.go.set()
            elif word == "close":
                break
        self.go.set()
        self.closing.set()

    def _commit(self, consumer: Consumer, reason: str) -> None:
        try:
            committed = consumer.commit(asynchronous=False)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.code() != KafkaError._NO_OFFSET:
                emit("error", error=err.name(), message=f"commit on {reason}: {err.str()}", fatal=err.fatal())
            return
        rows = [[p.topic, p.partition, p.offset] for p in committed or [] if p.offset >= 0]
        if rows:
            emit("committed", reason=reason, offsets=rows)

    # Callbacks: "assigned" stamped on entry, "revoked" on exit after the commit (support.ownership).
    def _on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        t_ns = time.monotonic_ns()
        if self.incremental:
            consumer.incremental_assign(parts)
        else:
            consumer.assign(parts)
        emit("assigned", t_ns, partitions=[[p.topic, p.partition] for p in parts], member_id=consumer.memberid())

    def _on_revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        if parts:
            self._commit(consumer, "revoke")
        if self.incremental:
            consumer.incremental_unassign(parts)
        else:
            consumer.unassign()
        emit("revoked", partitions=[[p.topic, p.partition] for p in parts])

    def _on_lost(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        if self.incremental:
            consumer.incremental_unassign(parts)
        else:
            consumer.unassign()
        emit("lost", partitions=[[p.topic, p.partition] for p in parts])

    @staticmethod
    def _on_error(err: KafkaError) -> None:
        emit("error", error=err.name(), message=err.str(), fatal=err.fatal())


def main(argv: list[str] | None = None) -> int:
    try:
        return Member(parse_args(argv)).run()
    except Exception as exc:
        emit("error", error=type(exc).__name__, message=str(exc), fatal=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
