"""confluent-kafka (librdkafka) consumer driver: one Consumer on its own thread.

Every librdkafka call for one consumer happens on that thread (callbacks run inside
consume()), so the driver never races librdkafka; tests read state through the
thread-safe event log (support.consumer_events).

Protocols:
- ``group_protocol="classic"``: session.timeout.ms defaults to 6000 (Tansu holds a
  JoinGroup ~session/2, so the 45 s default costs ~23 s per rebalance),
  heartbeat.interval.ms to min(1000, session/3), and partition.assignment.strategy
  may be set (``cooperative-sticky`` makes the rebalance protocol COOPERATIVE).
- ``group_protocol="consumer"`` (KIP-848): librdkafka REJECTS session.timeout.ms,
  heartbeat.interval.ms and partition.assignment.strategy (the coordinator owns them),
  so this driver refuses them too; ``remote_assignor`` sets group.remote.assignor.
  Assignment is always incremental.

Callbacks: with a COOPERATIVE protocol (cooperative-sticky, or the consumer protocol)
the driver calls incremental_assign/incremental_unassign, with EAGER assign/unassign.
confluent-kafka has no rebalance_protocol() accessor, so the choice follows from the
configuration above. "assigned" is stamped on entry to the callback, "revoked" on exit
after the synchronous commit (see support.ownership for why).

Stopping:
- close(): commit synchronously, then Consumer.close(), which revokes the assignment
  (callback, commit) and sends LeaveGroup (classic) / a leave heartbeat (consumer).
- stop_abruptly(): the poll thread stops without commit or close. NOTE librdkafka
  keeps heartbeating from its own background thread, so the member does NOT vanish at
  once: it stays in the group until max.poll.interval.ms passes without a poll, and then
  librdkafka itself leaves the group (it logs "Application maximum poll interval ...
  exceeded"). Pass ``max_poll_interval_ms`` (>= session timeout for classic) to bound
  that. For a member that dies without leaving (pure session expiry), kill a
  subprocess: support.java.JavaConsumer.kill(). The ledger closes the member's
  ownership at the moment polling stopped ("gone"); dispose() later closes the
  abandoned client quietly.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from .consumer_events import EventLogConsumer, partitions_field
from .ownership import OwnershipLedger

GroupProtocol = Literal["classic", "consumer"]
CommitMode = Literal["manual", "auto"]
CLASSIC_ONLY_KEYS = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")
_names = itertools.count(1)


def _tps(partitions: list[TopicPartition]) -> list[list[Any]]:
    return partitions_field((p.topic, p.partition) for p in partitions)


class _LogCollector(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record.getMessage())


class RdkafkaConsumer(EventLogConsumer):
    def __init__(
        self,
        bootstrap: str,
        topics: str | Sequence[str],
        group: str,
        *,
        member: str | None = None,
        ledger: OwnershipLedger | None = None,
        group_protocol: GroupProtocol = "classic",
        assignment_strategy: str | None = None,
        remote_assignor: str | None = None,
        group_instance_id: str | None = None,
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
        max_poll_interval_ms: int | None = None,
        commit_mode: CommitMode = "manual",
        auto_commit_interval_ms: int = 1000,
        debug: str | None = None,
        extra_config: dict[str, Any] | None = None,
        batch_size: int = 500,
        poll_timeout: float = 0.1,
    ) -> None:
        super().__init__(member or f"rd-{next(_names)}", ledger)
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        self.group = group
        self.group_protocol = group_protocol
        self.commit_mode = commit_mode
        self.batch_size = batch_size
        self.poll_timeout = poll_timeout
        self.config = self._build_config(
            bootstrap, group, group_protocol, assignment_strategy, remote_assignor, group_instance_id,
            session_timeout_ms, heartbeat_interval_ms, max_poll_interval_ms, commit_mode,
            auto_commit_interval_ms, debug, extra_config or {})
        strategy = str(self.config.get("partition.assignment.strategy", ""))
        self.incremental = group_protocol == "consumer" or "cooperative" in strategy
        self._logs: list[str] = []
        self._stop = threading.Event()
        self._abrupt = False
        self._muted = False  # set once abandoned: late callbacks must not touch the ledger
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    @staticmethod
    def _build_config(bootstrap: str, group: str, protocol: GroupProtocol, strategy: str | None,
                      remote_assignor: str | None, instance_id: str | None, session_ms: int | None,
                      heartbeat_ms: int | None, max_poll_ms: int | None, commit_mode: CommitMode,
                      auto_commit_ms: int, debug: str | None, extra: dict[str, Any]) -> dict[str, Any]:
        if protocol not in ("classic", "consumer"):
            raise ValueError(f"group_protocol must be 'classic' or 'consumer', not {protocol!r}")
        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "enable.auto.commit": commit_mode == "auto",
            "auto.commit.interval.ms": auto_commit_ms, "enable.partition.eof": False,
        }
        if protocol == "classic":
            if remote_assignor is not None:
                raise ValueError("remote_assignor (group.remote.assignor) applies to group_protocol='consumer' only")
            session = session_ms if session_ms is not None else 6000
            conf["session.timeout.ms"] = session
            conf["heartbeat.interval.ms"] = heartbeat_ms if heartbeat_ms is not None else min(1000, session // 3)
            if strategy is not None:
                conf["partition.assignment.strategy"] = strategy
        else:
            given = {"session_timeout_ms": session_ms, "heartbeat_interval_ms": heartbeat_ms,
                     "assignment_strategy": strategy}
            bad = [k for k, v in given.items() if v is not None] + [k for k in CLASSIC_ONLY_KEYS if k in extra]
            if bad:
                raise ValueError(f"group.protocol=consumer: librdkafka rejects {bad} (KIP-848 moves them "
                                 "to the broker); drop them")
            if remote_assignor is not None:
                conf["group.remote.assignor"] = remote_assignor
        if instance_id is not None:
            conf["group.instance.id"] = instance_id
        if max_poll_ms is not None:
            conf["max.poll.interval.ms"] = max_poll_ms
        if debug:
            conf["debug"] = debug
        conf.update(extra)
        return conf

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> RdkafkaConsumer:
        """Create, subscribe and start polling; returns once the consumer reported "ready"."""
        self._thread = threading.Thread(target=self._run, name=f"rdkafka-{self.member}", daemon=True)
        self._thread.start()
        self.wait_for(lambda: self._failure is not None or self.events("ready"), timeout, "ready")
        if self._failure is not None:
            raise RuntimeError(f"{self.member}: consumer failed to start: {self._failure!r}") from self._failure
        return self

    def close(self, timeout: float = 30.0) -> None:
        """Clean stop: commit, revoke, leave the group. Raises if the thread does not finish."""
        self._stop.set()
        self._join(timeout)
        if self._failure is not None:
            raise RuntimeError(f"{self.member}: consumer thread failed: {self._failure!r}") from self._failure

    def stop_abruptly(self, timeout: float = 10.0) -> None:
        """Stop polling without commit or close (see the module doc for what librdkafka then does)."""
        self._abrupt = True
        self._stop.set()
        self._join(timeout)

    def dispose(self) -> None:
        """Release a consumer left behind by stop_abruptly() (sends LeaveGroup now; callbacks muted)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            self._muted = True
            try:
                consumer.close()
            except (KafkaException, RuntimeError):
                pass

    def shutdown(self) -> None:
        """Best-effort teardown for fixtures: close if running, then dispose."""
        if self._thread is not None and self._thread.is_alive():
            try:
                self.close(timeout=20)
            except Exception:
                self.stop_abruptly()
        self.dispose()

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def logs(self) -> list[str]:
        """librdkafka log lines (with ``debug=...`` set), delivered through poll."""
        return list(self._logs)

    def _join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError(f"{self.member}: consumer thread still running after {timeout}s")

    # --- the poll thread -------------------------------------------------------------------

    def _run(self) -> None:
        logger = logging.getLogger(f"kcoord.test.rdkafka.{self.member}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        logger.addHandler(_LogCollector(self._logs))
        try:
            consumer = Consumer({**self.config, "error_cb": self._on_error}, logger=logger)
            self._consumer = consumer
            consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                               on_lost=self._on_lost)
            self.log.emit("ready", protocol=self.group_protocol, incremental=self.incremental)
            while not self._stop.is_set():
                self._poll_once(consumer)
            if self._abrupt:
                self.log.emit("gone")
                return
            if self.commit_mode == "manual":
                self._commit(consumer, "close")
            consumer.close()  # revokes through _on_revoke, then leaves the group
            self._consumer = None
            self.log.emit("closed")
        except BaseException as exc:
            self._failure = exc
            self.log.emit("error", error=type(exc).__name__, message=str(exc), fatal=True)
            self.dispose()  # do not leave a half-alive client heartbeating in the group

    def _poll_once(self, consumer: Consumer) -> None:
        messages = consumer.consume(self.batch_size, self.poll_timeout)
        got_record = False
        for m in messages:
            err = m.error()
            if err is not None:
                self.log.emit("error", error=err.name(), message=err.str(), fatal=err.fatal())
                continue
            got_record = True
            value, key = m.value(), m.key()
            self.log.emit("record", topic=m.topic(), partition=m.partition(), offset=m.offset(),
                          value=value.decode(errors="replace") if value is not None else None,
                          key=key.decode(errors="replace") if key is not None else None)
        if got_record and self.commit_mode == "manual":
            self._commit(consumer, "batch")

    def _commit(self, consumer: Consumer, reason: str) -> None:
        try:
            committed = consumer.commit(asynchronous=False)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.code() != KafkaError._NO_OFFSET:  # nothing consumed since the last commit
                self.log.emit("error", error=err.name(), message=f"commit on {reason}: {err.str()}",
                              fatal=err.fatal())
            return
        self.log.emit("committed", reason=reason, offsets=[[p.topic, p.partition, p.offset]
                                                           for p in committed or [] if p.offset >= 0])

    # --- callbacks (run inside consume() on the poll thread) -------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        t_ns = time.monotonic_ns()
        if self.incremental:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        if not self._muted:
            self.log.emit("assigned", t_ns, partitions=_tps(partitions), member_id=consumer.memberid())

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._muted:
            return
        self._commit(consumer, "revoke")
        if self.incremental:
            consumer.incremental_unassign(partitions)
        else:
            consumer.unassign()
        self.log.emit("revoked", partitions=_tps(partitions))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Lost partitions may already belong to someone else: no commit (Kafka's onPartitionsLost).
        if self.incremental:
            consumer.incremental_unassign(partitions)
        else:
            consumer.unassign()
        if not self._muted:
            self.log.emit("lost", partitions=_tps(partitions))

    def _on_error(self, err: KafkaError) -> None:
        if not self._muted:
            self.log.emit("error", error=err.name(), message=err.str(), fatal=err.fatal())
