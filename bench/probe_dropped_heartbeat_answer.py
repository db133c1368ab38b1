"""The 11th-member stall with real librdkafka consumers, made to happen every time: an answer
that tells a member to revoke comes later than its request timeout.

librdkafka (2.16) times a ConsumerGroupHeartbeat out after the heartbeat interval of the last
answer (its request scan runs each second) and afterwards sends no full request, so the late
answer is dropped and, by Kafka's rule (the assignment only on a full request or a change),
never repeated. On a loaded machine after a join storm, kcoord's durable writes took longer
than that; here the upstream is stopped instead (SIGSTOP) for ``--stop-s`` seconds right
after a second member has joined, so the first member's next answer, the revocation, waits
for a write behind the stopped upstream.

    KCOORD_TEST_PORTS=31500-31599 .venv/bin/python bench/probe_dropped_heartbeat_answer.py [--stop-s 2.5]

What runs: Tansu (tests/support/tansu.py), `kcoord serve` in front of it (kcoord's defaults),
a 6-partition topic, librdkafka consumer processes with the consumer protocol and
debug=cgrp (bench/rebalance/members.py; their logs stay in the printed directory). m0
subscribes and owns every partition; m1 subscribes; once ConsumerGroupDescribe through
kcoord shows two members the upstream is stopped, then resumed. Printed: whether the two
balance within ``--bound-s`` (exit status 0) or m0 keeps every partition (exit status 1),
and how many of m0's heartbeats timed out (librdkafka's REQTMOUT log lines).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("KCOORD_TEST_PORTS", "31500-31599")
os.environ.setdefault("KCOORD_BENCH_PORTS", os.environ["KCOORD_TEST_PORTS"])
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

from loadgen import procs  # noqa: E402
from loadgen.client import KafkaConnection  # noqa: E402
from loadgen.groups import describe_groups  # noqa: E402
from rebalance.members import ProcessMember  # noqa: E402
from rebalance.scenarios import Target  # noqa: E402
from rebalance.timeline import balanced  # noqa: E402

from support.admin import create_topic  # noqa: E402
from support.wait import wait_until  # noqa: E402

PARTITIONS = 6


async def _members_known(port: int, group: str, n: int, timeout: float) -> None:
    """ConsumerGroupDescribe through kcoord (answered by kcoord, not the upstream) until the
    group has ``n`` members."""
    conn = await KafkaConnection.open("127.0.0.1", port)
    try:
        deadline = time.monotonic() + timeout
        while True:
            (described,) = await describe_groups(conn, [group])
            if len(described.members) >= n:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{group}: {len(described.members)} of {n} members after {timeout}s")
            await asyncio.sleep(0.005)
    finally:
        conn.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stop-s", type=float, default=2.5, help="how long the upstream is stopped")
    ap.add_argument("--bound-s", type=float, default=25.0, help="how long to wait for a balanced group")
    args = ap.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="probe-dropped-answer-"))
    broker = procs.tansu()
    kc = procs.Kcoord(broker.bootstrap, (), 4).start()
    members: list[ProcessMember] = []
    try:
        tag = str(time.monotonic_ns())
        topic, group = f"dropped-{tag}", f"dropped-g-{tag}"
        create_topic(broker.bootstrap, topic, PARTITIONS)
        time.sleep(1.5)          # the gateway's metadata view has the topic (refresh: 1 s)
        target = Target("dropped", f"127.0.0.1:{kc.port}", protocol="consumer", debug=True)
        m0 = ProcessMember("m0", target.argv(topic, group, "m0"), log_dir=logs).start()
        members.append(m0)
        wait_until(lambda: len(m0.assignment()) == PARTITIONS, 30, 0.05, "m0 owning every partition")
        m1 = ProcessMember("m1", target.argv(topic, group, "m1"), log_dir=logs)
        members.append(m1)
        m1.start(wait_for=None)
        asyncio.run(_members_known(kc.port, group, 2, 30))
        os.kill(broker.process.pid, signal.SIGSTOP)
        try:
            time.sleep(args.stop_s)
        finally:
            os.kill(broker.process.pid, signal.SIGCONT)
        resumed = time.monotonic()

        def settled() -> bool:
            state = {m.member: m.assignment() for m in members}
            return balanced(state, list(state), topic, PARTITIONS)

        try:
            wait_until(settled, args.bound_s, 0.1, "a balanced group")
            ok = True
        except Exception:
            ok = False
        views = {m.member: sorted(p for _, p in m.assignment()) for m in members}
        timeouts = m0.stderr_text().count("Timed out ConsumerGroupHeartbeatRequest")
        print(f"{'BALANCED' if ok else 'STALL'} {time.monotonic() - resumed:.1f}s after the upstream resumed: "
              f"{views}; m0's heartbeats timed out: {timeouts}; member logs in {logs}")
        return 0 if ok else 1
    finally:
        for m in members:
            m.close(timeout=20)
        kc.stop()
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
