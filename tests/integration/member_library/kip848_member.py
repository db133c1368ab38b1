"""One `Kip848Consumer` (members/aiokafka_consumer.py: KIP-848 membership by the member
library, fetching by aiokafka) as an OS process, so a test can kill it for real (SIGKILL:
no leave heartbeat, no commit, its sockets closed by the kernel) and the coordinator sees
only the silence that a session timeout ends.

Run: python kip848_member.py --bootstrap H:P --topic T --group G --name N [--client-assignor]
(the repository root on PYTHONPATH). With --client-assignor the member brings the sample
sticky assignor (seed 000, key 32700); without it, it asks for the server's.

Protocol (the member processes' event stream of migration/rehearse/member.py, which runs
this one too, and of tests/support/consumer_events.py: one JSON object a line on stdout,
stamped with time.monotonic_ns(), CLOCK_MONOTONIC, the parent's time line):
  ready; assigned (stamped on entry to the callback, before any record of the partitions is
  handed out); revoked / lost (stamped on exit: no record of them is handed out any more,
  and revoked ones are committed); record (topic, partition, offset, value; stamped when
  `getmany` handed it out); error; closed.
A line "close" on stdin (or its end) makes it leave the group gracefully (revoke, commit,
leave heartbeat) and exit 0.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from typing import Any

from aiokafka import TopicPartition

from members.aiokafka_consumer import CommitFailed, Kip848Consumer, RebalanceListener
from members.sticky import StickyAssignor


def emit(event: str, t_ns: int | None = None, **fields: Any) -> None:
    line = json.dumps({"t": time.monotonic_ns() if t_ns is None else t_ns, "event": event, **fields})
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _tps(tps: set[TopicPartition]) -> list[list[Any]]:
    return [[tp.topic, tp.partition] for tp in sorted(tps)]


class _Emitting(RebalanceListener):
    """Each change with the member epoch it happened at (what a failure report needs)."""

    def __init__(self) -> None:
        self.consumer: Kip848Consumer | None = None

    def _epoch(self) -> int:
        return self.consumer.member.member_epoch if self.consumer is not None else -1

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        emit("assigned", partitions=_tps(assigned), epoch=self._epoch())

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        emit("revoked", partitions=_tps(revoked), epoch=self._epoch())

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        emit("lost", partitions=_tps(lost), epoch=self._epoch())


def _watch_stdin(loop: asyncio.AbstractEventLoop, close: asyncio.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "close":
            break
    loop.call_soon_threadsafe(close.set)       # "close", or the parent's end of the pipe closed


async def main(args: argparse.Namespace) -> None:
    close = asyncio.Event()
    threading.Thread(target=_watch_stdin, args=(asyncio.get_running_loop(), close), daemon=True).start()
    listener = _Emitting()
    consumer = Kip848Consumer(args.bootstrap, args.group, [args.topic], rebalance_timeout_ms=10_000,
                              assignors=[StickyAssignor()] if args.client_assignor else [],
                              client_id=args.name, listener=listener, fetch_max_wait_ms=100)
    listener.consumer = consumer
    await consumer.start()
    emit("ready", member_id=consumer.member_id)
    while not close.is_set():
        batches = await consumer.getmany(timeout_ms=100)
        t_ns = time.monotonic_ns()
        for tp, records in batches.items():
            for r in records:
                value = r.value.decode(errors="replace") if r.value is not None else None
                emit("record", t_ns, topic=tp.topic, partition=tp.partition, offset=r.offset, value=value)
        try:
            await consumer.commit()
        except (CommitFailed, TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError) as e:
            # a commit refused mid-rebalance (stale epoch) is retried with the next batch
            emit("error", error=type(e).__name__, message=str(e), fatal=False)
    await consumer.stop()                      # leave: revoke (commit), then the leave heartbeat
    emit("closed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--topic", "--group", "--name"):
        parser.add_argument(name, required=True)
    parser.add_argument("--client-assignor", action="store_true")
    asyncio.run(main(parser.parse_args()))
