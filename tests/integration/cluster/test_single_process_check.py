"""A plain `kcoord serve` (no --instance-id, fencing none) writes without fencing, so it must
be the only kcoord on its state topic (issue 14 §2). It watches the membership group of its
state topic in the background (clustered.SoloWatch) and stops with exit code 4 when another
kcoord is there: of two plain serves the later one, and a plain serve beside a cluster.
Runs on Tansu and Kafka 4.3 (the `upstream` fixture)."""
from __future__ import annotations

import time

from support import group_probe as probe
from support.admin import create_topic
from support.kcoord import CLUSTER, KcoordProcess
from support.wait import wait_until

SHARDS = 4
EXIT_NOT_ALONE = 4
# Detection: the watch's join (Tansu holds it session/2 = 1.5 s, Kafka delays a new group's
# first rebalance), the second's rebalance, and the recheck a session (3 s) after joining.
DETECT_S = 30


def _serves(process: KcoordProcess, topic: str, group: str, offset: int) -> None:
    """A commit through `process` is acknowledged and read back: it still serves."""
    wait_until(lambda: probe.commit(process.bootstrap, group, topic, offset) == 0, 30,
               message=f"a commit through {process.bootstrap}")
    assert probe.fetch(process.bootstrap, group, topic) == (0, offset)


def _stop_all(*processes: KcoordProcess) -> None:
    for p in processes:
        if p.process is not None and p.process.poll() is None:
            p.stop()


def test_a_second_plain_serve_on_the_same_state_topic_stops_and_the_first_serves_on(upstream, names):
    topic, state = names.topic(), f"__kc_{names.topic()}"
    create_topic(upstream.bootstrap, topic, 1)
    first = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER)
    second = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER)
    try:
        first.start(timeout=60)
        _serves(first, topic, "g-before", 3)
        started = time.monotonic()
        second.start(timeout=60)      # ready at once: the watch does not hold up serving
        ready_s = time.monotonic() - started
        wait_until(lambda: second.process.poll() is not None, DETECT_S,
                   message="the second plain kcoord on the state topic stops")
        assert second.process.returncode == EXIT_NOT_ALONE, second.log_text()[-3000:]
        log = second.log_text()
        # The log line names the other process (its watch's instance id and address) and what to do.
        assert "also holds solo-" in log and f":{first.port}" in log, log[-3000:]
        assert "--instance-id" in log
        assert first.process.poll() is None, first.log_text()[-3000:]
        _serves(first, topic, "g-after", 5)
        assert probe.fetch(first.bootstrap, "g-before", topic) == (0, 3)
        print(f"second ready after {ready_s:.2f}s, stopped {time.monotonic() - started:.2f}s after its start")
    finally:
        _stop_all(first, second)


def test_a_plain_serve_beside_a_cluster_stops_and_the_cluster_serves_on(upstream, names):
    topic, state = names.topic(), f"__kc_{names.topic()}"
    create_topic(upstream.bootstrap, topic, 1)
    member = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER,
                           extra_args=("--instance-id", "kc-0"))
    plain = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER)
    try:
        member.start(timeout=60)
        _serves(member, topic, "g-before", 3)
        plain.start(timeout=60)
        wait_until(lambda: plain.process.poll() is not None, DETECT_S,
                   message="the plain kcoord beside the cluster stops")
        assert plain.process.returncode == EXIT_NOT_ALONE, plain.log_text()[-3000:]
        assert "also holds kc-0 at" in plain.log_text(), plain.log_text()[-3000:]
        assert member.process.poll() is None
        _serves(member, topic, "g-after", 5)
    finally:
        _stop_all(member, plain)


def test_the_check_can_be_turned_off(upstream, names):
    """`--config cluster.solo.check=false`: two plain serves both run (the operator's choice)."""
    state = f"__kc_{names.topic()}"
    off = (*CLUSTER, "cluster.solo.check=false")
    first = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER)
    second = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=off)
    try:
        first.start(timeout=60)
        second.start(timeout=60)
        # The first, older, is never told to stop, and the second does not watch: both still
        # run once the first has seen the group for two sessions (3 s each).
        deadline = time.monotonic() + 8
        wait_until(lambda: first.process.poll() is not None or second.process.poll() is not None
                   or time.monotonic() > deadline, 15, message="eight seconds with both running")
        assert first.process.poll() is None and second.process.poll() is None
    finally:
        _stop_all(first, second)
