"""Raw-protocol loads against any coordinator address (Kafka's own or kcoord's): what each
measures and why it is the same load on both.

- ``heartbeat_rate``: ``members`` simulated KIP-848 members in ``groups`` groups join
  (bench/loadgen: ConsumerGroupHeartbeat v1, as Java and librdkafka send it) until every
  group is Stable (ConsumerGroupDescribe); then their pre-encoded steady heartbeats (group
  id, member id, epoch; every other field null) are sent by raw-socket worker processes
  (bench/loadgen/blast.py): ``closed_loop`` = one connection per member, one request in
  flight each (how consumers heartbeat), ``pipelined`` = one connection per worker with a
  window of requests in flight (Kafka serves one request per connection at a time, so on
  Kafka this is close to two members in a closed loop; it is kcoord's ceiling).
- ``join_storm``: ``members`` members open a connection each and send their joins in one
  pass of the loop; the time until every member is at one member epoch and the members
  own every partition exactly once (their own view), confirmed Stable at that epoch by
  ConsumerGroupDescribe. Members follow the interval each response gives them.
- ``commit_rate``: OffsetCommit v8 of one partition per request, ``groups`` x
  ``partitions`` distinct keys, generation -1 and no member id (a "simple" group, the
  commits an admin tool or a consumer without group management makes: no membership
  validation, so only the durable write is measured). Kafka answers after the offsets
  record is appended to ``__consumer_offsets`` (replication factor 1 here); kcoord after
  its record is acknowledged by the upstream broker (acks=all).
"""
from __future__ import annotations

import asyncio
import multiprocessing as mp
import select
import socket
import statistics
import time
from datetime import timedelta
from typing import Any

from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from loadgen import blast as blast_module
from loadgen import procs
from loadgen.blast import BlastResult, Load, blast
from loadgen.client import KafkaConnection, MemberDriver
from loadgen.consumer_member import ConsumerMember
from loadgen.groups import StabilityTracker, confirmed_stable, describe_groups, form_groups
from loadgen.wire import CONSUMER_GROUP_HEARTBEAT, FrameTemplate, response_error_offset

FIND_COORDINATOR = 10
OFFSET_COMMIT = 8
OFFSET_COMMIT_VERSION = 8


def wait_for_coordinator(port: int, timeout: float = 60.0) -> float:
    """FindCoordinator until the broker answers without error: the first one makes Kafka
    create ``__consumer_offsets`` and load its partitions (until then every group request
    gets NOT_COORDINATOR). Returns the seconds it took."""

    async def go() -> float:
        t0 = time.monotonic()
        conn = await KafkaConnection.open("127.0.0.1", port)
        try:
            keys = tuple(f"probe-{i}" for i in range(64))   # spread over the offsets partitions
            while True:
                r = await conn.call(FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=keys))
                if all(c.error_code == ErrorCode.none for c in r.coordinators):
                    return time.monotonic() - t0
                if time.monotonic() - t0 > timeout:
                    raise TimeoutError(f"FindCoordinator still failing: {[c.error_code for c in r.coordinators][:5]}")
                await asyncio.sleep(0.2)
        finally:
            conn.close()

    return procs.run(go())


# ------------------------------------------------------------------ heartbeats
def group_sizes(members: int, groups: int, prefix: str) -> dict[str, int]:
    base, extra = divmod(members, groups)
    return {f"{prefix}-{i:04d}": base + (1 if i < extra else 0) for i in range(groups)}


def form_heartbeat_groups(port: int, prefix: str, members: int, groups: int, topic: str, partitions: int,
                          sizes: dict[str, int] | None = None) -> tuple[list[bytes], float, list[ConsumerMember]]:
    """Join the members and wait until every group is Stable; their steady frames, the
    seconds the formation took, and the members (to leave afterwards). ``sizes`` (group id
    -> members) names the groups instead of ``prefix``, ``members`` and ``groups``."""

    async def go() -> tuple[list[bytes], list[ConsumerMember]]:
        driver, conns, by_group = await form_groups("127.0.0.1", port, sizes or group_sizes(members, groups, prefix),
                                                    (topic,), partitions, timeout=180)
        driver.stop()
        await asyncio.sleep(0.3)
        for c in conns:
            c.close()
        ms = [m for g in by_group.values() for m in g]
        return [m.steady_template().with_correlation(i) for i, m in enumerate(ms)], ms

    t0 = time.monotonic()
    frames, ms = procs.run(go())
    return frames, time.monotonic() - t0, ms


LEAVE_EPOCH = -1


async def _leave(conns: list[KafkaConnection], members: list[ConsumerMember]) -> int:
    """Every member leaves (ConsumerGroupHeartbeat with member epoch -1, what a consumer
    sends on close); returns how many were answered without error. Without it the members
    of a finished measurement would expire one by one 45 s later, each expiry a rebalance
    of a big group, on top of the next measurement."""
    calls = []
    for i, m in enumerate(members):
        request = ConsumerGroupHeartbeatRequest(group_id=m.group_id, member_id=m.member_id, member_epoch=LEAVE_EPOCH,
                                                rebalance_timeout=timedelta(milliseconds=-1), topic_partitions=None)
        calls.append(conns[i % len(conns)].call(CONSUMER_GROUP_HEARTBEAT, 1, request, timeout=60))
    answers = await asyncio.gather(*calls, return_exceptions=True)
    return sum(1 for a in answers if not isinstance(a, BaseException) and a.error_code == ErrorCode.none)


def leave(port: int, members: list[ConsumerMember]) -> int:
    async def go() -> int:
        conns = [await KafkaConnection.open("127.0.0.1", port) for _ in range(max(1, len(members) // 100))]
        try:
            return await _leave(conns, members)
        finally:
            for c in conns:
                c.close()

    return procs.run(go())


def blast_frames(port: int, pid: int, frames: list[bytes], error_offset: int, mode: str, *, workers: int,
                 seconds: float, warmup: float, window: int, connections: int | None = None) -> BlastResult:
    if connections is None:
        connections = max(1, len(frames) // workers) if mode == "closed_loop" else 1
    if mode == "closed_loop":
        return closed_loop_blast(port, pid, frames, error_offset, workers=workers, connections=connections,
                                 seconds=seconds, warmup=warmup)
    return blast("127.0.0.1", port, error_offset, frames, mode=mode, workers=workers, window_size=window,
                 connections=connections, seconds=seconds, warmup=warmup, server_pids={"server": pid})


def heartbeat_error_offset() -> int:
    return response_error_offset(CONSUMER_GROUP_HEARTBEAT, 1)


def blast_figures(r: BlastResult) -> dict[str, Any]:
    cpu = r.server_cpu["server"]
    return {"rate": r.rate, "responses": r.responses, "errors": {str(k): v for k, v in r.errors.items()},
            "server_cpu_cores": cpu / r.window, "server_cpu_us_per_request": cpu / r.responses * 1e6
            if r.responses else None, "generator_cpu_cores": r.generator_cpu / r.window}


# ------------------------------------------------------------------ join storm
def join_storm(port: int, group: str, topic: str, partitions: int, members: int, timeout: float) -> dict[str, Any]:
    """One storm; figures in ms from the first join sent."""
    return procs.run(_storm(port, group, topic, partitions, members, timeout))


async def _storm(port: int, group: str, topic: str, partitions: int, n: int, timeout: float) -> dict[str, Any]:
    members = [ConsumerMember(group, (topic,)) for _ in range(n)]
    tracker = StabilityTracker(members, partitions)
    conns = [await KafkaConnection.open("127.0.0.1", port) for _ in range(n)]
    admin = await KafkaConnection.open("127.0.0.1", port)
    join_times: list[float] = []
    joined: set[int] = set()
    t0 = 0.0

    def observe(member: ConsumerMember, response: Any, now: float) -> None:
        tracker.observe(member, response, now)
        if member.joined and id(member) not in joined:
            joined.add(id(member))
            join_times.append(now - t0)

    driver = MemberDriver(conns, members, observe)
    t0 = time.monotonic()
    driver.start()
    result: dict[str, Any] = {}
    describes = 0
    try:
        while not result:
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"not Stable after {timeout}s: epochs {dict(tracker.epochs)}, owned "
                                   f"{tracker.owned_total}/{partitions}, joined {len(joined)}/{n}")
            try:
                await asyncio.wait_for(tracker.event.wait(), 1.0)
            except TimeoutError:
                pass
            tracker.event.clear()
            # Every member has been answered (so every join has bumped the group epoch) and
            # all are at one epoch owning every partition: ask the coordinator to confirm.
            # (A group's first epoch is 0 or 1 depending on the coordinator, so the epoch
            # alone cannot tell; describing a big group is costly, so it is asked only here.)
            if not tracker.is_stable() or len(joined) < n or tracker.stable_epoch < n:
                continue
            stable_at, epoch = tracker.stable_at, tracker.stable_epoch
            (described,) = await describe_groups(admin, [group])
            describes += 1
            if stable_at is not None and tracker.stable_at == stable_at and confirmed_stable(described, epoch):
                result = {"ms": (stable_at - t0) * 1000, "epoch": epoch, "heartbeats": driver.requests,
                          "revoked": sum(m.revocations for m in members),
                          "errors": sum(sum(m.errors.values()) for m in members),
                          "joins_answered_p50_ms": 1000 * statistics.median(join_times),
                          "all_joins_answered_ms": 1000 * max(join_times), "describes": describes,
                          "stable_interval_ms": statistics.median(m.heartbeat_interval_ms for m in members)}
    finally:
        driver.stop()
        if result:
            result["left"] = await _leave(conns, members)
        for c in (*conns, admin):
            c.close()
    return result


# ------------------------------------------------------------------ commits
def commit_frames(prefix: str, groups: int, topic: str, partitions: int) -> list[bytes]:
    """One pre-encoded OffsetCommit per (group, partition); equal-length names, so every
    response has its error code at the same offset."""
    frames = []
    for g in range(groups):
        for p in range(partitions):
            request = OffsetCommitRequest(
                group_id=f"{prefix}-{g:04d}", generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None, topics=(OffsetCommitRequestTopic(name=topic, partitions=(
                    OffsetCommitRequestPartition(partition_index=p, committed_offset=1000 + p,
                                                 committed_leader_epoch=-1, committed_metadata=""),)),))
            frames.append(FrameTemplate.of(OFFSET_COMMIT, OFFSET_COMMIT_VERSION, request)
                          .with_correlation(len(frames)))
    return frames


def commit_error_offset(topic: str) -> int:
    """OffsetCommit v8 response, one topic with one partition: size(4) correlation(4)
    header tags(1) throttle(4) topics-length(1) name(1 + len) partitions-length(1)
    partition_index(4), then the error code."""
    assert len(topic) < 127
    return 4 + 4 + 1 + 4 + 1 + 1 + len(topic) + 1 + 4


def check_commit(port: int, prefix: str, topic: str) -> bool:
    """One commit, decoded in full: it must succeed (and the blast's fixed offset be right)."""

    async def go() -> None:
        conn = await KafkaConnection.open("127.0.0.1", port)
        try:
            r = await conn.call(OFFSET_COMMIT, OFFSET_COMMIT_VERSION, OffsetCommitRequest(
                group_id=f"{prefix}-check", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                topics=(OffsetCommitRequestTopic(name=topic, partitions=(OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=""),)),)))
        finally:
            conn.close()
        code = r.topics[0].partitions[0].error_code
        if code != ErrorCode.none:
            raise RuntimeError(f"OffsetCommit on port {port}: {code!r}")

    procs.run(go())
    return True


# ------------------------------------------------------------------ closed loop, connected first
# bench/loadgen/blast.py's closed loop connects its sockets one by one and starts at a fixed
# time. Kafka's listen backlog is 50 (socket.listen.backlog.size): a thousand connections
# opened back to back overflow it, dropped SYNs come back after 1 s, 3 s, 7 s, ... and the
# window can pass before the last socket is up. Here every worker opens its sockets first,
# a few handshakes at a time, and the measured window starts only when all workers are
# connected; then the same closed-loop worker runs (its _connect hands out the sockets
# already open).

def _connect_all(host: str, port: int, n: int, batch: int = 16, timeout: float = 120.0) -> list[socket.socket]:
    """``n`` connections, at most ``batch`` handshakes under way at once (two workers stay
    under Kafka's backlog of 50, so no SYN is dropped and retried seconds later)."""
    socks: list[socket.socket] = []
    pending: dict[int, socket.socket] = {}
    ep = select.epoll()
    deadline = time.monotonic() + timeout
    while len(socks) < n or pending:
        while len(socks) < n and len(pending) < batch:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex((host, port))
            socks.append(s)
            pending[s.fileno()] = s
            ep.register(s.fileno(), select.EPOLLOUT)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending) + n - len(socks)} of {n} connections to {host}:{port} "
                               f"not up after {timeout}s")
        for fd, _ in ep.poll(1.0):
            s = pending.pop(fd)
            ep.unregister(fd)
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                raise OSError(err, f"connect to {host}:{port}")
    ep.close()
    for s in socks:
        s.setblocking(True)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return socks


def _connected_worker(host: str, port: int, error_offset: int, frames: list[bytes], connections: int,
                      warmup: float, seconds: float, ready: mp.Queue, go: mp.Queue, out: mp.Queue) -> None:
    socks = _connect_all(host, port, connections)
    ready.put(len(socks))
    start_at = go.get()
    blast_module._connect = lambda load: socks.pop()      # this forked worker's copy only
    blast_module.closed_loop_worker(Load(host, port, error_offset, start_at, warmup, seconds),
                                    frames, connections, out)


def closed_loop_blast(port: int, pid: int, frames: list[bytes], error_offset: int, *, workers: int,
                      connections: int, seconds: float, warmup: float) -> BlastResult:
    """``workers`` processes with ``connections`` sockets each, one request in flight per socket."""
    ctx = mp.get_context("fork")
    ready, go, out = ctx.Queue(), ctx.Queue(), ctx.Queue()
    shares = [frames[i::workers] for i in range(workers)]
    ps = [ctx.Process(target=_connected_worker, args=("127.0.0.1", port, error_offset, share, connections,
                                                      warmup, seconds, ready, go, out)) for share in shares]
    window = procs.forked_window(ps, ready, go, out, [pid], warmup=warmup, seconds=seconds)
    results = window.results
    errors: dict[int, int] = {}
    for r in results:
        for code, n in r.errors.items():
            errors[code] = errors.get(code, 0) + n
    responses = sum(r.responses for r in results)
    return BlastResult(rate=responses / seconds, responses=responses, errors=errors,
                       generator_cpu=sum(r.cpu_seconds for r in results), window=seconds,
                       server_cpu={"server": window.cpu_by_pid[pid]})
