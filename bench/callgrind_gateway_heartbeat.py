"""Instructions per request through the gateway's whole in-process path (ClientConnection
.data_received, the service, the runtime's write to an acknowledging in-memory state topic,
the flush of the answer), counted by callgrind, for three workloads:

- ``heartbeat``: a steady ConsumerGroupHeartbeat v1 (100 members in 10 groups, reconciled);
- ``join-storm``: per member of a KIP-848 join storm: ``--requests`` members, one connection
  each, send their joining ConsumerGroupHeartbeat v1 to one empty group in one pass, and
  every join is answered (its records written and acknowledged);
- ``offset-commit``: a durable OffsetCommit v9 of a steady consumer-group member's owned
  partitions (100 members in 10 groups, 10 partitions each, one connection per member; with
  ``--partitions K`` the first K of them, e.g. 4, the side-by-side benchmark's shape), in
  rounds of one commit per member, each answered after its write is acknowledged.

    .venv/bin/python bench/callgrind_gateway_heartbeat.py [--workload heartbeat|join-storm|offset-commit]
        [--requests N] [--partitions K] [--repo PATH]

re-runs itself under `valgrind --tool=callgrind` (apt package valgrind) with collection on
only inside the measured call (``itertools.starmap``), so set-up is never counted, and
prints instructions per request. Instrumentation itself is switched on (`callgrind_control
-i on`) only once the set-up is done, so imports and set-up run at valgrind's plain speed;
the count is the same as with instrumentation on from the start. ``--repo PATH`` measures another checkout's
`coordinator/` and `bench/loadgen/` (e.g. a ``git worktree`` of an older commit) with this
harness. Compare two checkouts with the same Python build and the same command: the
absolute count depends on both. Without valgrind, ``--plain`` runs the workload once and
checks every answer.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import itertools
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

BENCH = Path(__file__).resolve().parent

TOPIC = "cg"
WORKLOADS = {
    "heartbeat": "steady ConsumerGroupHeartbeat v1",
    "join-storm": "join-storm member (joining ConsumerGroupHeartbeat v1, written)",
    "offset-commit": "durable OffsetCommit v9 ({partitions} partitions, written)",
}
OWNED_PARTITIONS = 10       # of each steady member (100 members on the 100-partition topic)
OFFSET_COMMIT_VERSION = 9


class _Transport(asyncio.Transport):
    """Counts writes and keeps the last one; never pauses. ``answers`` is shared by every
    connection of a run, so a workload can wait for all its answers."""

    def __init__(self, answers: _Answers | None = None) -> None:
        super().__init__()
        self.writes = 0
        self.last = b""
        self.answers = answers

    def get_extra_info(self, name, default=None):  # type: ignore[no-untyped-def]
        return ("10.1.1.1", 5555) if name == "peername" else default

    def write(self, data) -> None:  # type: ignore[no-untyped-def]
        self.writes += 1
        self.last = bytes(data)
        if self.answers is not None:
            self.answers.add(self.last)

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def is_closing(self) -> bool: return False
    def close(self) -> None: ...
    def abort(self) -> None: ...
    def get_write_buffer_size(self) -> int: return 0


class _Answers:
    """Answer frames of a run (one write may hold several): counts them and the ones whose
    error code (at ``error_at`` in the frame) is not 0, and wakes a waiter at a count."""

    def __init__(self, error_at: int) -> None:
        self.error_at = error_at
        self.count = 0
        self.errors = 0
        self._target = 0
        self._done: asyncio.Future[None] | None = None

    def add(self, data: bytes) -> None:
        pos = 0
        while pos < len(data):
            size = int.from_bytes(data[pos:pos + 4], "big")
            if data[pos + self.error_at:pos + self.error_at + 2] != b"\x00\x00":
                self.errors += 1
            self.count += 1
            pos += 4 + size
        if self._done is not None and self.count >= self._target and not self._done.done():
            self._done.set_result(None)

    def wait_for(self, count: int) -> asyncio.Future[None]:
        self._target = count
        self._done = asyncio.get_running_loop().create_future()
        if self.count >= count:
            self._done.set_result(None)
        return self._done


# The join storm and the commits run the event loop inside the measured call, where a
# timer due by the wall clock would fire: under valgrind a run takes minutes, so sessions,
# the assignment interval and the write timeout are made longer than any run, and what is counted does not
# depend on how fast the machine was (the first join computes the assignment at once, the
# others find it pending, as in a storm faster than the interval).
SLOW_CLOCK = {"consumer_session_timeout_ms": 3_600_000, "consumer_max_session_timeout_ms": 3_600_000,
              "consumer_assignment_interval_ms": 3_600_000, "offsets_commit_timeout_ms": 3_600_000}


def _service(partitions: int, **settings: int):  # type: ignore[no-untyped-def]
    from loadgen.inproc import AckingStateTopic

    from coordinator.config import CoordinatorConfig
    from coordinator.group.image import MetadataImage, TopicImage
    from coordinator.service import GroupCoordinatorService

    config = CoordinatorConfig(state_topic_partitions=4, **settings)
    service = GroupCoordinatorService(config, AckingStateTopic())
    image = MetadataImage.of([TopicImage(topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, TOPIC), name=TOPIC,
                                         num_partitions=partitions)])
    for runtime in service.runtimes:
        runtime.begin_load()
        runtime.finish_load(0)
    service.on_metadata_update(image)
    return service


async def _steady_members(service):  # type: ignore[no-untyped-def]
    """100 members in 10 groups on the 100-partition topic, joined and reconciled."""
    from loadgen.consumer_member import ConsumerMember
    from loadgen.wire import CONSUMER_GROUP_HEARTBEAT

    from coordinator.protocol.service import ClientInfo

    # The client id and host of the steady frames (loadgen.wire): a change would be a write.
    client = ClientInfo("kcoord-loadgen", "10.1.1.1", 5555, "bootstrap")
    # Deterministic member ids: the same set-up in every run.
    members = [ConsumerMember(f"g-{i % 10:04d}", (TOPIC,), member_id=f"member-{i:015d}") for i in range(100)]
    for _ in range(20):
        for m in members:
            m.on_response(await service.handle(CONSUMER_GROUP_HEARTBEAT, 1, m.next_request(), client))
        for runtime in service.runtimes:
            for key in list(getattr(runtime, "_timers", {})):
                if key and key[0] == "assignment":
                    runtime.submit(lambda shard, now, key=key: shard.on_timer(key, None, now + 10_000))
        if all(m.is_steady() for m in members):
            break
    if not all(m.is_steady() for m in members):
        raise SystemExit("the members did not reach a steady state in 20 rounds")
    return members


def _gateway(service, served: dict[int, tuple[int, int]]):  # type: ignore[no-untyped-def]
    from coordinator.config import CoordinatorConfig
    from coordinator.gateway import Gateway
    from coordinator.gateway.routes import build_routes
    from coordinator.protocol import apis
    from coordinator.protocol.api_versions import Features, api_versions_body

    gateway = Gateway(service, "127.0.0.1:1", "127.0.0.1:0", "state", config=CoordinatorConfig())
    gateway.api_versions = {apis.API_VERSIONS: (0, 4), **served}
    gateway.routes = build_routes(gateway.api_versions, set(served))
    gateway.api_versions_bodies = {v: api_versions_body(v, gateway.api_versions, Features()) for v in range(5)}
    return gateway


def _connection(gateway, answers: _Answers | None = None):  # type: ignore[no-untyped-def]
    from coordinator.gateway.connection import ClientConnection
    from coordinator.gateway.listeners import BOOTSTRAP, ListenerInfo

    connection = ClientConnection(gateway, ListenerInfo(BOOTSTRAP, "127.0.0.1", 0, None, (("127.0.0.1", 1),)))
    transport = _Transport(answers)
    connection.connection_made(transport)
    return connection, transport


async def _heartbeat(n: int) -> None:
    from loadgen.wire import CONSUMER_GROUP_HEARTBEAT

    service = _service(100)
    members = await _steady_members(service)
    frames = [m.steady_template().with_correlation(i) for i, m in enumerate(members)]
    connection, transport = _connection(_gateway(service, {CONSUMER_GROUP_HEARTBEAT: (0, 1)}))
    args = [(frames[i % len(frames)],) for i in range(n)]
    _instrument()
    gc.collect()
    # Only this loop runs inside itertools.starmap's C function, where callgrind collects.
    collections.deque(itertools.starmap(connection.data_received, args), maxlen=0)
    if transport.writes != n or transport.last[13:15] != b"\x00\x00":
        raise SystemExit(f"expected {n} steady answers, got {transport.writes} (last {transport.last[:20]!r})")


def _instrument() -> None:
    """Under the parent's valgrind: say the set-up is done, and wait until the parent has
    switched callgrind's instrumentation on (``--instr-atstart=no``)."""
    ready = os.environ.get("KCOORD_CALLGRIND_READY")
    if ready is None:
        return
    Path(ready).touch()
    go = Path(ready + ".go")
    while not go.exists():
        time.sleep(0.01)


def _measured(loop: asyncio.AbstractEventLoop, work) -> None:  # type: ignore[no-untyped-def]
    """Runs the coroutine ``work`` (sends, then waits for every answer: the writes and
    flushes run in the event loop) as the one call callgrind collects in."""
    _instrument()
    gc.collect()
    collections.deque(itertools.starmap(loop.run_until_complete, [(work,)]), maxlen=0)


def _join_storm(loop: asyncio.AbstractEventLoop, n: int) -> None:
    from loadgen.consumer_member import ConsumerMember
    from loadgen.wire import CONSUMER_GROUP_HEARTBEAT, encode_request

    async def set_up():  # type: ignore[no-untyped-def]
        service = _service(2 * n, **SLOW_CLOCK)
        answers = _Answers(error_at=13)     # size, correlation id, tagged fields, throttle time
        gateway = _gateway(service, {CONSUMER_GROUP_HEARTBEAT: (0, 1)})
        connections = [_connection(gateway, answers)[0] for _ in range(n)]
        members = [ConsumerMember("storm", (TOPIC,), member_id=f"member-{i:015d}") for i in range(n)]
        frames = [encode_request(CONSUMER_GROUP_HEARTBEAT, 1, m.next_request(), i) for i, m in enumerate(members)]
        return answers, list(zip(connections, frames))

    answers, sends = loop.run_until_complete(set_up())

    async def storm() -> None:
        for connection, frame in sends:
            connection.data_received(frame)
        await answers.wait_for(n)

    _measured(loop, storm())
    if answers.count != n or answers.errors:
        raise SystemExit(f"expected {n} joins answered without error, got {answers.count} ({answers.errors} errors)")


def _offset_commit(loop: asyncio.AbstractEventLoop, n: int, committed: int = OWNED_PARTITIONS) -> None:
    from loadgen.wire import encode_request

    from coordinator.protocol.apis import OFFSET_COMMIT

    async def set_up():  # type: ignore[no-untyped-def]
        service = _service(100, **SLOW_CLOCK)
        members = await _steady_members(service)
        # The first partition's error code: size, correlation id, tagged fields, throttle time,
        # topics (1), name ("cg"), partitions (1), partition index.
        answers = _Answers(error_at=4 + 4 + 1 + 4 + 1 + 1 + len(TOPIC) + 1 + 4)
        gateway = _gateway(service, {OFFSET_COMMIT: (2, OFFSET_COMMIT_VERSION)})   # kio has v2 up
        connections = [_connection(gateway, answers)[0] for _ in members]
        rounds = []
        for r in range(-(-n // len(members))):
            sends = []
            for i, (m, connection) in enumerate(zip(members, connections)):
                (partitions,) = m.owned.values()
                request = _commit_request(m, sorted(partitions)[:committed], offset=r + 1)
                sends.append((connection, encode_request(OFFSET_COMMIT, OFFSET_COMMIT_VERSION, request,
                                                         r * len(members) + i)))
            rounds.append(sends)
        return answers, rounds

    answers, rounds = loop.run_until_complete(set_up())
    total = sum(len(sends) for sends in rounds)

    async def commits() -> None:
        done = 0
        for sends in rounds:
            for connection, frame in sends:
                connection.data_received(frame)
            done += len(sends)
            await answers.wait_for(done)

    _measured(loop, commits())
    if answers.count != total or answers.errors:
        raise SystemExit(f"expected {total} commits answered without error, got {answers.count} "
                         f"({answers.errors} errors)")


def _commit_request(member, partitions: list[int], offset: int):  # type: ignore[no-untyped-def]
    """What a KIP-848 consumer commits: its owned partitions at its member epoch."""
    from kio.schema.offset_commit.v9.request import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )
    from kio.static.primitive import i32, i64

    return OffsetCommitRequest(
        group_id=member.group_id, generation_id_or_member_epoch=i32(member.member_epoch),
        member_id=member.member_id, group_instance_id=None,
        topics=(OffsetCommitRequestTopic(name=TOPIC, partitions=tuple(
            OffsetCommitRequestPartition(partition_index=i32(p), committed_offset=i64(offset),
                                         committed_leader_epoch=i32(-1), committed_metadata="")
            for p in partitions)),))


def _run_plain(workload: str, n: int, partitions: int) -> None:
    if workload == "heartbeat":
        asyncio.run(_heartbeat(n))
        return
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        if workload == "join-storm":
            _join_storm(loop, n)
        else:
            _offset_commit(loop, n, partitions)
    finally:
        loop.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="heartbeat")
    parser.add_argument("--requests", type=int, default=20_000,
                        help="requests measured (join-storm: members; offset-commit: rounded up to 100s)")
    parser.add_argument("--partitions", type=int, default=OWNED_PARTITIONS,
                        help=f"offset-commit: partitions per commit, 1-{OWNED_PARTITIONS} (default: all the member owns)")
    parser.add_argument("--repo", type=Path, default=BENCH.parent,
                        help="the checkout whose coordinator/ and bench/loadgen/ are measured")
    parser.add_argument("--plain", action="store_true", help="run the workload without valgrind")
    args = parser.parse_args()
    if not 1 <= args.partitions <= OWNED_PARTITIONS:
        parser.error(f"--partitions must be 1-{OWNED_PARTITIONS}")
    what = WORKLOADS[args.workload].format(partitions=args.partitions)
    repo = args.repo.resolve()
    if args.plain:
        sys.path[:0] = [str(repo), str(repo / "bench")]
        _run_plain(args.workload, args.requests, args.partitions)
        print(f"{args.requests} x {what} answered")
        return
    from loadgen import callgrind  # here: a --plain child imports the measured checkout's loadgen

    with tempfile.TemporaryDirectory() as tmp:
        total, _ = callgrind.count(
            [__file__, "--plain", "--workload", args.workload, "--requests", str(args.requests),
             "--partitions", str(args.partitions), "--repo", str(repo)], ["starmap_next"], repo, tmp)
    requests = args.requests if args.workload != "offset-commit" else -(-args.requests // 100) * 100
    print(f"{total / requests:,.0f} instructions per {what} "
          f"({total:,} over {requests:,}; {repo}; {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
