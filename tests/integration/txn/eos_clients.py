"""Real transactional clients for the exactly-once tests through kcoord (issue 16), and the reads
that check them.

- JavaEosLoop: tests/clients/java/EosLoop.java, a kafka-clients 4.3 consume-transform-produce
  loop stepped one command at a time (each command answers one JSON line), so a test can
  check OffsetFetch between sendOffsetsToTransaction and the commit or abort.
- JavaStreamsApp: tests/clients/java/streams/EosStreamsApp.java, Kafka Streams 4.3 with
  processing.guarantee=exactly_once_v2 (upper-cases input into output).
- fetch_offsets: OffsetFetch v7 through kcoord, with or without require_stable (KIP-447).
- read_committed_values: what a read_committed consumer of a topic sees.

Rules: every wait is bounded and its failure names what was awaited and shows the JVM's stderr
tail; a JVM is always reaped by shutdown() (the tests call it in finally).
"""
from __future__ import annotations

import asyncio
import collections
import json
import queue
import subprocess
import threading
from typing import Any

from confluent_kafka import Consumer
from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v7 import request as offset_fetch_v7
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32

from coordinator.upstream.client import UpstreamClient as KafkaLink
from support import processes
from support.java import java_command, libs_java_command
from support.wait import wait_until

# Errors a fenced (zombie) Java producer reports: PRODUCER_FENCED and INVALID_PRODUCER_EPOCH both
# become ProducerFencedException in the 4.x client; InvalidProducerEpochException is what
# some paths of transactions v2 surface (KIP-890).
FENCED = {"ProducerFencedException", "InvalidProducerEpochException"}


class _Jvm:
    """A JVM whose stdout lines go to a queue and stderr to a bounded tail."""

    def __init__(self, argv: list[str], name: str) -> None:
        self.name = name
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: collections.deque[str] = collections.deque(maxlen=200)
        self.process = processes.track(subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            encoding="utf-8", errors="replace", bufsize=1))
        threading.Thread(target=self._pump_out, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump_out(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line.rstrip("\n"))

    def next_line(self, timeout: float, what: str) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"{self.name}: no answer to {what} within {timeout}s; stderr:\n"
                                 f"{self.stderr_tail()}") from None
        if line is None:
            raise AssertionError(f"{self.name}: exited ({self.process.poll()}) before answering {what}; "
                                 f"stderr:\n{self.stderr_tail()}")
        return line

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def stderr_tail(self, lines: int = 40) -> str:
        return "\n".join(list(self.stderr)[-lines:])

    def shutdown(self, timeout: float = 30.0) -> int:
        """Close (stdin "close"), wait; kill -9 if it does not exit in time."""
        return processes.close_by_stdin(self.process, "close", timeout)


class JavaEosLoop(_Jvm):
    def __init__(self, bootstrap: str, *, input: str, output: str, group: str, txn_id: str,
                 protocol: str = "classic", txn_timeout_ms: int = 60_000, name: str = "eos-loop") -> None:
        super().__init__(java_command("EosLoop", [
            "--bootstrap", bootstrap, "--input", input, "--output", output, "--group", group,
            "--txn-id", txn_id, "--group-protocol", protocol, "--txn-timeout-ms", str(txn_timeout_ms),
            "--client-id", name]), name)
        self.init = json.loads(self.next_line(60, "initTransactions"))

    def step(self, command: str, timeout: float = 90.0) -> dict[str, Any]:
        """Run one command; its answer ({"ok": ...} or {"error": ..., "exception": ...})."""
        self.send(command)
        return json.loads(self.next_line(timeout, repr(command)))

    def ok(self, command: str, timeout: float = 90.0) -> dict[str, Any]:
        """Run one command that must succeed."""
        answer = self.step(command, timeout)
        assert "ok" in answer, f"{self.name}: {command!r} failed: {answer}; stderr:\n{self.stderr_tail()}"
        return answer


class JavaStreamsApp(_Jvm):
    def __init__(self, bootstrap: str, *, app_id: str, input: str, output: str, state_dir: str) -> None:
        super().__init__(libs_java_command("EosStreamsApp", [
            "--bootstrap", bootstrap, "--app-id", app_id, "--input", input, "--output", output,
            "--state-dir", state_dir]), f"streams-{app_id}")
        self.seen: list[str] = []

    def wait_state(self, state: str, timeout: float = 60.0) -> None:
        def reached() -> bool:
            while True:
                try:
                    line = self.lines.get_nowait()
                except queue.Empty:
                    return f"state {state}" in self.seen
                if line is None:
                    raise AssertionError(f"{self.name} exited ({self.process.poll()}) before {state}; seen "
                                         f"{self.seen}; stderr:\n{self.stderr_tail()}")
                self.seen.append(line)
                if line.startswith("fatal"):
                    raise AssertionError(f"{self.name}: {line}; stderr:\n{self.stderr_tail()}")
        wait_until(reached, timeout, 0.1, lambda: f"{self.name} in state {state} (seen {self.seen}); stderr:\n"
                                                  f"{self.stderr_tail()}")


def fetch_offsets(bootstrap: str, group: str, topic: str, partitions: int,
                  require_stable: bool = True) -> dict[int, tuple[ErrorCode, int]]:
    """OffsetFetch v7 through kcoord: partition -> (partition error, committed offset, -1: none).
    Retries COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR (a restarting kcoord) for 10 s."""
    async def go() -> dict[int, tuple[ErrorCode, int]]:
        host, _, port = bootstrap.rpartition(":")
        link = await KafkaLink.connect([(host, int(port))], client_id="eos-java-test")
        try:
            req = offset_fetch_v7.OffsetFetchRequest(group_id=GroupId(group), topics=(
                offset_fetch_v7.OffsetFetchRequestTopic(name=TopicName(topic), partition_indexes=tuple(
                    i32(p) for p in range(partitions))),), require_stable=require_stable)
            for _ in range(100):
                r = await link.request(req, 10)
                if r.error_code in (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator):
                    await asyncio.sleep(0.1)
                    continue
                assert r.error_code is ErrorCode.none, f"OffsetFetch of {group} through {bootstrap}: {r}"
                return {int(p.partition_index): (p.error_code, int(p.committed_offset))
                        for t in r.topics for p in t.partitions}
            raise AssertionError(f"OffsetFetch of {group} kept answering COORDINATOR_LOAD_IN_PROGRESS / "
                                 "NOT_COORDINATOR for 10 s")
        finally:
            link.close()
    return asyncio.run(go())


def stable(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int] | None:
    """The committed offsets with require_stable, or None while any partition answers an error
    (UNSTABLE_OFFSET_COMMIT: a transaction holding offsets of the group is still open)."""
    got = fetch_offsets(bootstrap, group, topic, partitions, require_stable=True)
    if any(code is not ErrorCode.none for code, _ in got.values()):
        return None
    return {p: off for p, (_, off) in got.items()}


def read_committed_values(bootstrap: str, topic: str, group: str, expected: int,
                          settle: float = 2.0) -> list[str]:
    """Every value a read_committed consumer of ``topic`` reads: at least ``expected`` within
    60 s, then whatever else arrives within ``settle`` seconds (an aborted or duplicated output
    would show up there)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    seen: list[str] = []
    try:
        c.subscribe([topic])

        def read() -> bool:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    seen.append(m.value().decode())
            return len(seen) >= expected

        wait_until(read, 60, message=lambda: f"{expected} committed records of {topic} (got {len(seen)})")
        for m in c.consume(500, settle):
            if m.error() is None:
                seen.append(m.value().decode())
    finally:
        c.close()
    return seen
