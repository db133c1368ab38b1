"""A plain `kcoord serve` (no --instance-id, fencing none) writes without fencing, so it must
be the only kcoord on its state topic. Before it loads or serves a shard it checks the
membership group of its state topic (clustered.SoloWatch), and stops with exit code 4
without ever serving when another kcoord is there: of two plain serves the later one, and a
plain serve beside a cluster. Once serving it answers and writes only under its watch's
membership lease, so one paused past its session wakes to answer nothing stale beside its
successor (docs/user/cluster.md, the safety argument). Runs on Tansu and Kafka 4.4 (the
`upstream` fixture); the pause on Kafka 4.4."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time

from coordinator.group.hashing import partition_for
from support import group_probe as probe
from support import processes, raw_client
from support.admin import create_topic
from support.kcoord import CLUSTER, REPO, KcoordProcess, free_port_block
from support.wait import wait_until

SHARDS = 4
EXIT_NOT_ALONE = 4
# Detection: the watch's join (Tansu holds it session/2 = 1.5 s, Kafka delays a new group's
# first rebalance), the second's rebalance, and the recheck a session (3 s) after joining.
DETECT_S = 30
DEBUG = "INFO,kcoord.cluster=DEBUG"


def _serves(process: KcoordProcess, topic: str, group: str, offset: int) -> None:
    """A commit through `process` is acknowledged and read back: it still serves."""
    wait_until(lambda: probe.commit(process.bootstrap, group, topic, offset) == 0, 30,
               message=f"a commit through {process.bootstrap}")
    assert probe.fetch(process.bootstrap, group, topic) == (0, offset)


def _log_tail(process: KcoordProcess) -> str:
    """The end of a process's log for a failure's message, without the DEBUG lines of its
    membership heartbeats answered NONE (three a second would push everything else out):
    their count and the last one stay, to show whether the heartbeat loop ran."""
    kept: list[str] = []
    routine: list[str] = []
    for line in process.log_text().splitlines():
        (routine if "Heartbeat generation" in line and "-> none" in line else kept).append(line)
    last = f"\n({len(routine)} heartbeats answered NONE, the last: {routine[-1]})" if routine else ""
    return "\n".join(kept)[-4000:] + last


def _stop_all(*processes: KcoordProcess) -> None:
    for p in processes:
        if p.process is not None and p.process.poll() is None:
            p.stop()


def _never_served(process: KcoordProcess, run) -> None:
    """`run` is its `run_to_exit`: it stopped with EXIT_NOT_ALONE before it was ready."""
    assert run.returncode == EXIT_NOT_ALONE, run.stderr[-3000:]
    assert "kcoord ready" not in run.stdout, run.stdout
    assert "would serve state topic" in run.stderr, run.stderr[-3000:]


@contextlib.contextmanager
def _paused_with_successor(upstream, state: str, topic: str, group: str, successor_commits: bool):
    """`first` serves (a commit of offset 1), is paused (SIGSTOP) past its membership session
    and a second plain serve starts beside it; with `successor_commits` the second one
    acknowledges a commit of offset 2. Yields (first, second) with `first` still paused;
    `first` is woken (SIGCONT) on leaving the block, and both are stopped after the test."""
    # DEBUG: the membership's JoinGroup, SyncGroup and Heartbeat answers, for a failure's log.
    first = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER, log_level=DEBUG)
    second = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER, log_level=DEBUG)
    try:
        first.start(timeout=60)
        _serves(first, topic, group, 1)
        assert first.process is not None
        first.process.send_signal(signal.SIGSTOP)
        try:
            second.port = free_port_block(2)
            second.start(timeout=DETECT_S + 30)     # ready: its check found no one serving
            if successor_commits:
                _serves(second, topic, group, 2)
            yield first, second
        finally:
            first.process.send_signal(signal.SIGCONT)
    finally:
        _stop_all(first, second)


def test_a_second_plain_serve_on_the_same_state_topic_stops_before_serving_and_the_first_serves_on(upstream, names):
    topic, state = names.topic(), f"__kc_{names.topic()}"
    create_topic(upstream.bootstrap, topic, 1)
    first = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER)
    second = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER)
    try:
        first.start(timeout=60)
        _serves(first, topic, "g-before", 3)
        started = time.monotonic()
        run = second.run_to_exit(timeout=DETECT_S + 30)
        _never_served(second, run)
        # The log line names the other process (its watch's instance id and address) and what to do.
        assert "also holds solo-" in run.stderr and f":{first.port}" in run.stderr, run.stderr[-3000:]
        assert "--instance-id" in run.stderr
        assert first.process.poll() is None, first.log_text()[-3000:]
        _serves(first, topic, "g-after", 5)
        assert probe.fetch(first.bootstrap, "g-before", topic) == (0, 3)
        # Its lease held through the second's join and leave: it never had to ask again.
        assert "checking the group again" not in first.log_text(), first.log_text()[-3000:]
        print(f"second stopped {time.monotonic() - started:.2f}s after its start, never ready")
    finally:
        _stop_all(first, second)


def test_a_plain_serve_beside_a_cluster_stops_before_serving_and_the_cluster_serves_on(upstream, names):
    topic, state = names.topic(), f"__kc_{names.topic()}"
    create_topic(upstream.bootstrap, topic, 1)
    member = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER,
                           extra_args=("--instance-id", "kc-0"))
    plain = KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER)
    try:
        member.start(timeout=60)
        _serves(member, topic, "g-before", 3)
        run = plain.run_to_exit(timeout=DETECT_S + 30)
        _never_served(plain, run)
        assert "also holds kc-0 at" in run.stderr, run.stderr[-3000:]
        assert member.process.poll() is None
        _serves(member, topic, "g-after", 5)
    finally:
        _stop_all(member, plain)


def test_two_plain_serves_started_together_never_serve_together(upstream, names, tmp_path):
    """Started at once: one serves, the other stops (exit 4) without having acknowledged a
    commit or answered a read; commits and reads go to both the whole time."""
    topic, state = names.topic(), f"__kc_{names.topic()}"
    create_topic(upstream.bootstrap, topic, 1)
    pair = [KcoordProcess(upstream.bootstrap, state, state_partitions=SHARDS, config=CLUSTER, port=free_port_block(2))
            for _ in range(2)]
    logs = {p.port: tmp_path / f"kcoord-{p.port}.log" for p in pair}
    answered: dict[int, int] = {p.port: 0 for p in pair}
    offsets = iter(range(1, 1_000_000))

    def probe_both() -> bool:
        for p in pair:
            if p.process is None or p.process.poll() is not None:
                continue
            try:
                if probe.commit(p.bootstrap, "g", topic, next(offsets)) == 0:
                    answered[p.port] += 1
                if probe.fetch(p.bootstrap, "g", topic)[0] == 0:
                    answered[p.port] += 1
            except (OSError, AssertionError):     # refused, or closed by the one stopping: no answer
                pass
        stopped = [p for p in pair if p.process is not None and p.process.poll() is not None]
        return len(stopped) == 1 and any(answered.values())

    try:
        for p in pair:      # not waiting for the first to be ready
            with open(logs[p.port], "w") as log:
                p.process = processes.track(subprocess.Popen(
                    p.serve_args(), cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=processes.orphan_guard()))
        wait_until(probe_both, DETECT_S + 30, interval=0.02, message=lambda: f"one stops, one serves ({answered})")
        loser = next(p for p in pair if p.process is not None and p.process.poll() is not None)
        winner = next(p for p in pair if p is not loser)
        output = logs[loser.port].read_text(errors="replace")
        assert loser.process is not None and loser.process.returncode == EXIT_NOT_ALONE, output[-3000:]
        assert "kcoord ready" not in output and "would serve state topic" in output, output[-3000:]
        assert answered[loser.port] == 0, answered       # it never answered from state
        _serves(winner, topic, "g-after", 5)
    finally:
        _stop_all(*pair)


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


NOT_COORDINATOR = 16


def _on_waking(process: KcoordProcess, requests: list[tuple[int, int, object]]) -> list[object | None]:
    """Send `requests` (api key, version, body) to `process` while it is paused (the kernel
    queues the bytes), wake it and return its answers in order; None for each one it closed
    the connection on instead of answering."""
    assert process.process is not None
    try:
        zombie = socket.create_connection(("127.0.0.1", process.port), timeout=30)
        for correlation_id, (api_key, version, body) in enumerate(requests):
            zombie.sendall(raw_client.encode_request(api_key, version, correlation_id, body))
    finally:
        process.process.send_signal(signal.SIGCONT)
    answers: list[object | None] = []
    try:
        for api_key, version, _ in requests:
            frame = raw_client.read_frame(zombie)
            answers.append(None if frame is None else raw_client.decode_response(api_key, version, frame)[1])
            if frame is None:
                answers.extend([None] * (len(requests) - len(answers)))
                break
    finally:
        zombie.close()
    return answers


def _fetched(answer) -> tuple[int, int]:
    g = answer.groups[0]
    p = g.topics[0].partitions[0] if not g.error_code else None
    return (int(g.error_code), -1) if p is None else (int(p.error_code), int(p.committed_offset))


def test_a_paused_plain_serve_wakes_beside_its_successor_answers_nothing_stale_and_stops(kafka44, names):
    """A plain serve paused (SIGSTOP) past its membership session; a second one starts,
    passes its check (the paused one's watch expired) and acknowledges a commit; a commit
    and a read wait in the paused one's socket and it wakes. Its lease ran out during the
    pause: it answers NOT_COORDINATOR (or closes), sends no write, and never answers a read
    below the successor's commit; its watch, a candidate again, yields to the successor and
    it stops (exit 4). The successor serves on, its log free of any foreign write."""
    topic, group = names.topic(), names.group()
    # The queued commit goes to another group of the same shard: the read of `group` shows
    # what the woken process still holds, and a write it sent would land in that shard.
    other = next(g for i in range(1000) if partition_for(g := f"{group}-w{i}", SHARDS) == partition_for(group, SHARDS))
    state = f"__kc_{topic}"
    create_topic(kafka44.bootstrap, topic, 1)
    with _paused_with_successor(kafka44, state, topic, group, successor_commits=True) as (first, second):
        woken = time.monotonic()
        fetch, commit = _on_waking(first, [(probe.OFFSET_FETCH, 8, _fetch_request(group, topic)),
                                           (probe.OFFSET_COMMIT, 8, probe.commit_request(other, topic, 7))])
        assert fetch is None or _fetched(fetch)[0] == NOT_COORDINATOR or _fetched(fetch)[1] >= 2, fetch
        assert commit is None or commit.topics[0].partitions[0].error_code == NOT_COORDINATOR, commit
        stale: list[int] = []

        def read_until_stopped() -> bool:
            if first.process.poll() is not None:
                return True
            try:
                code, offset = probe.fetch(first.bootstrap, group, topic)
            except (OSError, AssertionError):     # refused or closed while it stops: no answer
                return False
            if code == 0 and offset < 2:
                stale.append(offset)
            return False

        wait_until(read_until_stopped, DETECT_S, interval=0.05,
                   message=lambda: f"the woken plain serve stops; its log:\n{_log_tail(first)}\n"
                   f"its successor's log:\n{_log_tail(second)}")
        print(f"the woken plain serve stopped {time.monotonic() - woken:.2f}s after waking")
        output = first.log_text()
        assert stale == [], stale
        assert first.process.returncode == EXIT_NOT_ALONE, output[-3000:]
        assert "serves state topic" in output and "also holds solo-" in output, output[-3000:]
        # Its queued commit was never sent: the successor's next write lands where it expects.
        assert second.process is not None and second.process.poll() is None, second.log_text()[-3000:]
        _serves(second, topic, group, 3)
        assert "someone else wrote" not in second.log_text() and "landed at offset" not in second.log_text()


def test_a_paused_plain_serve_whose_successor_left_reloads_before_it_answers_again(kafka44, names):
    """Paused past its session; a second plain serve starts, acknowledges a commit and stops
    (SIGTERM: it leaves the group). The woken one asks the group again, is admitted (alone),
    reloads its shards and serves on: every read it answers shows the successor's commit,
    never its own older one."""
    topic, group = names.topic(), names.group()
    state = f"__kc_{topic}"
    create_topic(kafka44.bootstrap, topic, 1)
    with _paused_with_successor(kafka44, state, topic, group, successor_commits=True) as (first, second):
        assert second.stop() == 0
        first.process.send_signal(signal.SIGCONT)
        answers: list[int] = []
        last: list[object] = []

        def answered() -> bool:
            try:
                code, offset = probe.fetch(first.bootstrap, group, topic)
            except (OSError, AssertionError) as e:
                last[:] = [e]
                return False
            last[:] = [code]
            if code == 0:
                answers.append(offset)
            return code == 0

        wait_until(answered, DETECT_S, interval=0.05, message=lambda: f"the woken plain serve answers again "
                   f"(last: {last}; alive: {first.process.poll() is None}); its log:\n{_log_tail(first)}")
        assert answers == [2], answers
        assert first.process.poll() is None, first.log_text()[-3000:]
        assert "reloading every shard" in first.log_text(), first.log_text()[-3000:]
        _serves(first, topic, group, 3)


def _fetch_request(group: str, topic: str):
    t = raw_client.request_types(probe.OFFSET_FETCH, 8)
    return t.OffsetFetchRequest(groups=(t.OffsetFetchRequestGroup(
        group_id=group, topics=(t.OffsetFetchRequestTopics(name=topic, partition_indexes=(0,)),)),),
        require_stable=False)


def test_a_session_timeout_the_broker_refuses_is_named_and_the_serve_goes_on_unwatched(kafka44, names):
    """Kafka answers INVALID_SESSION_TIMEOUT to a JoinGroup whose session lies outside its
    group.min/max.session.timeout.ms (the fixture's minimum: 1 s). Retrying cannot help, so
    the watch stops at once naming the setting, and the plain serve serves unwatched instead
    of waiting out the verdict timeout with a retry every few seconds."""
    state = f"__kc_{names.topic()}"
    topic = names.topic()
    create_topic(kafka44.bootstrap, topic, 1)
    refused = ("cluster.session.timeout.ms=500", "cluster.heartbeat.interval.ms=100", "cluster.lease.margin.ms=100")
    process = KcoordProcess(kafka44.bootstrap, state, state_partitions=SHARDS, config=refused)
    try:
        process.start(timeout=60)
        _serves(process, topic, "g-refused", 3)
        wait_until(lambda: "single-process check stopped" in process.log_text(), 30,
                   message=lambda: f"the watch named its refusal:\n{_log_tail(process)}")
        log = process.log_text()
        assert "INVALID_SESSION_TIMEOUT" in log and "cluster.session.timeout.ms=500" in log, _log_tail(process)
        assert "no verdict from membership group" not in log, _log_tail(process)
        assert "answered invalid_session_timeout; retrying" not in log, _log_tail(process)
    finally:
        _stop_all(process)
