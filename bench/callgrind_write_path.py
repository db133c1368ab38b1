"""Instructions per durable OffsetCommit and per state-topic write through kcoord's real write
path, counted by callgrind: the gateway, the service and the runtime as in
callgrind_gateway_heartbeat.py's ``offset-commit`` workload, but behind them the state log a
plain ``kcoord serve`` writes through: cluster/solo.py's LeaseGatedLog over
runtime/state_topic.py's StateTopic and its lean writer (runtime/lean_writer.py: the batch's
encoding, the ProduceRequest on a real upstream link, coordinator/upstream/client.py, the
acknowledgement's decode, completing the appends), with the event loop's callbacks between.

    .venv/bin/python bench/callgrind_write_path.py [--commits-per-write 1,10,100] [--shards 1]
        [--partitions 4] [--commits 600] [--state topic,acking] [--repo PATH] [--profile FILE]

The upstream is an in-process fake broker: the link's transport hands each ProduceRequest
frame to it, and on the next loop turn (as a socket's answer would arrive) it answers every
partition at the next offsets with acks=all's answer, encoded with kio, and feeds the frame
to the link's ``data_received``. The fake broker's own decoding and encoding run inside
``functools.reduce``, which callgrind's ``--toggle-collect=functools_reduce`` leaves out of
the count, so only kcoord's instructions are counted (the measured call itself is an
``itertools.starmap``, as in callgrind_gateway_heartbeat.py; a nested starmap would not
toggle: callgrind toggles on a function's outermost call only).

Each round sends ``K`` commits (``--commits-per-write``) to each of ``--shards`` shards
(state topic partitions), one per member connection, in one loop turn, and waits for every
answer: each shard writes one batch of K commits, all shards' batches in one ProduceRequest.
The figures printed: instructions per commit, per batch (write) and per request, and the
commits per batch actually seen (the lean writer's counters). ``--state acking`` runs the
same rounds over bench/loadgen/inproc.py's AckingStateTopic (acknowledges at once, no
writer): its difference to ``--state topic`` is the write path. With K = 1, 10, 100 the cost
per batch is fit as ``fixed + K * per-commit`` (least squares over the Ks given).

``--repo PATH`` measures another checkout's ``coordinator/`` (e.g. a ``git worktree`` of an
older commit) with this harness; compare two checkouts with one Python build. ``--profile
FILE`` keeps the callgrind output of the last run (callgrind_annotate --inclusive=yes FILE).
``--plain`` runs one workload once without valgrind and checks every answer.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import os
import shutil
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

BENCH = Path(__file__).resolve().parent
TOPIC = "cg"
STATE_TOPIC = "__kcoord_cg"
PRODUCER_ID = 4242


def _uncounted(fn, arg):  # type: ignore[no-untyped-def]
    """``fn(arg)`` inside ``functools.reduce``: callgrind's ``--toggle-collect=functools_reduce``
    switches collection off on entering it and on again on leaving (kcoord never calls it)."""
    return functools.reduce(lambda _, a: fn(a), (arg,), None)


class _FakeBroker:
    """Answers the state topic's ProduceRequests: every partition at its next offset."""

    def __init__(self) -> None:
        self.next: dict[int, int] = collections.defaultdict(int)
        self.requests = 0

    def answer(self, data: bytes) -> bytes:
        from kio.schema.errors import ErrorCode
        from kio.schema.produce.v9.request import ProduceRequest
        from kio.schema.produce.v9.response import (
            PartitionProduceResponse,
            ProduceResponse,
            TopicProduceResponse,
        )
        from kio.static.primitive import i32Timedelta, i64

        from coordinator.protocol.codec import decode_body, encode_body

        api_key = int.from_bytes(data[4:6], "big")
        version = int.from_bytes(data[6:8], "big")
        correlation = int.from_bytes(data[8:12], "big")
        client_len = int.from_bytes(data[12:14], "big")
        if (api_key, version) != (0, 9):
            raise SystemExit(f"the fake broker answers Produce v9 only, got {api_key} v{version}")
        request = decode_body(ProduceRequest, data, 14 + client_len + 1)   # + header v2's tagged fields
        if request.acks != -1:
            raise SystemExit(f"a state-topic write without acks=all: {request.acks}")
        self.requests += 1
        topics = []
        for t in request.topic_data:
            parts = []
            for p in t.partition_data:
                records = bytes(p.records or b"")
                count = int.from_bytes(records[57:61], "big")      # the batch's record count
                base = self.next[int(p.index)]
                self.next[int(p.index)] = base + count
                parts.append(PartitionProduceResponse(
                    index=p.index, error_code=ErrorCode.none, base_offset=i64(base), log_append_time=None,
                    log_start_offset=i64(0), record_errors=(), error_message=None))
            topics.append(TopicProduceResponse(name=t.name, partition_responses=tuple(parts)))
        body = encode_body(ProduceResponse(responses=tuple(topics), throttle_time=i32Timedelta.parse(timedelta(0))))
        frame = correlation.to_bytes(4, "big") + b"\x00" + body            # response header v1
        return len(frame).to_bytes(4, "big") + frame


class _BrokerTransport(asyncio.Transport):
    """The link's transport: a written request is answered on the next loop turn."""

    def __init__(self, broker: _FakeBroker, link) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.broker = broker
        self.link = link

    def write(self, data) -> None:  # type: ignore[no-untyped-def]
        asyncio.get_running_loop().call_soon(self._answer, bytes(data))

    def _answer(self, data: bytes) -> None:
        self.link.data_received(_uncounted(self.broker.answer, data))

    def get_extra_info(self, name, default=None):  # type: ignore[no-untyped-def]
        return default

    def is_closing(self) -> bool: return False
    def close(self) -> None: ...
    def abort(self) -> None: ...


def _state_log(kind: str, shards: int):  # type: ignore[no-untyped-def]
    """The state log a plain serve writes through (LeaseGatedLog over StateTopic), its
    upstream a fake broker; or the acknowledging in-memory one."""
    if kind == "acking":
        from loadgen.inproc import AckingStateTopic

        return AckingStateTopic(), None
    from coordinator.cluster.solo import LeaseGatedLog
    from coordinator.runtime.lean_writer import LeanWriter
    from coordinator.runtime.state_topic import StateTopic
    from coordinator.upstream.client import UpstreamClient

    broker = _FakeBroker()
    address = ("broker", 9092)

    async def open_link(addresses):  # type: ignore[no-untyped-def]
        link = UpstreamClient(address, "kcoord-writer")
        link.connection_made(_BrokerTransport(broker, link))
        return link

    state = StateTopic(f"{address[0]}:{address[1]}", STATE_TOPIC, shards)
    links = state._links("writer")
    links.open = open_link
    links.request_timeout_s = 3600.0      # minutes under valgrind: no timer may fire
    links.brokers = {1: address}
    links.leaders = {p: 1 for p in range(shards)}
    lean = LeanWriter(links, STATE_TOPIC, delivery_timeout_s=3600.0)
    lean.producer_id, lean.epoch = PRODUCER_ID, 0       # what InitProducerId would have answered
    state._lean = lean
    return LeaseGatedLog(state, lambda: True), lean


def _service(state_log, shards: int):  # type: ignore[no-untyped-def]
    import uuid

    from callgrind_gateway_heartbeat import SLOW_CLOCK

    from coordinator.config import CoordinatorConfig
    from coordinator.group.image import MetadataImage, TopicImage
    from coordinator.service import GroupCoordinatorService

    service = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=shards, **SLOW_CLOCK), state_log)
    image = MetadataImage.of([TopicImage(topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, TOPIC), name=TOPIC,
                                         num_partitions=100)])
    for runtime in service.runtimes:
        runtime.begin_load()
        runtime.finish_load(0)
    service.on_metadata_update(image)
    return service


def _run(args: argparse.Namespace) -> None:
    from callgrind_gateway_heartbeat import (
        OFFSET_COMMIT_VERSION,
        _Answers,
        _commit_request,
        _connection,
        _gateway,
        _measured,
        _steady_members,
    )
    from loadgen.wire import encode_request

    from coordinator.protocol.apis import OFFSET_COMMIT

    k, shards = args.commits_per_write, args.shards
    per_round = k * shards
    rounds_n = -(-args.commits // per_round)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def set_up():  # type: ignore[no-untyped-def]
        state_log, lean = _state_log(args.state, shards)
        service = _service(state_log, shards)
        members = await _steady_members(service)
        by_shard: dict[int, list] = collections.defaultdict(list)
        for m in members:
            by_shard[service.partition_for(m.group_id)].append(m)
        if len(by_shard) < shards or min(len(v) for v in by_shard.values()) < k:
            raise SystemExit(f"{k} commits per write need {k} members on each of {shards} shards; "
                             f"the shards hold {sorted(len(v) for v in by_shard.values())}")
        chosen = [m for s in range(shards) for m in by_shard[s][:k]]
        answers = _Answers(error_at=4 + 4 + 1 + 4 + 1 + 1 + len(TOPIC) + 1 + 4)
        gateway = _gateway(service, {OFFSET_COMMIT: (2, OFFSET_COMMIT_VERSION)})
        connections = [_connection(gateway, answers)[0] for _ in chosen]
        rounds = []
        for r in range(rounds_n):
            rounds.append([(c, encode_request(OFFSET_COMMIT, OFFSET_COMMIT_VERSION,
                                              _commit_request(m, sorted(next(iter(m.owned.values())))[:args.partitions],
                                                              offset=r + 1), r * per_round + i))
                           for i, (m, c) in enumerate(zip(chosen, connections))])
        return answers, rounds, lean

    answers, rounds, lean = loop.run_until_complete(set_up())
    before = (lean.batches_sent, lean.requests_sent) if lean is not None else (0, 0)

    async def commits() -> None:
        done = 0
        for sends in rounds:
            for connection, frame in sends:
                connection.data_received(frame)
            done += len(sends)
            await answers.wait_for(done)

    if args.cprofile:
        import cProfile

        cProfile.runctx("loop.run_until_complete(commits())", globals(), locals(), args.cprofile)
    else:
        _measured(loop, commits())
    total = rounds_n * per_round
    if answers.count != total or answers.errors:
        raise SystemExit(f"expected {total} commits answered without error, got {answers.count} "
                         f"({answers.errors} errors)")
    batches, requests = ((lean.batches_sent - before[0], lean.requests_sent - before[1]) if lean is not None
                         else (rounds_n * shards, rounds_n))
    loop.close()
    counts = os.environ.get("KCOORD_WRITE_PATH_COUNTS")
    if counts:
        Path(counts).write_text(f"{total} {batches} {requests}")
    print(f"{total} commits answered in {batches} batches, {requests} requests")


def _count(args: argparse.Namespace, k: int, state: str, profile: str | None) -> tuple[int, int, int, int]:
    from loadgen import callgrind  # here: a --plain child imports the measured checkout's loadgen

    with tempfile.TemporaryDirectory() as tmp:
        counts = Path(tmp) / "counts"
        total, out = callgrind.count(
            [__file__, "--plain", "--commits-per-write", str(k), "--shards", str(args.shards),
             "--partitions", str(args.partitions), "--commits", str(args.commits), "--state", state,
             "--repo", str(args.repo)],
            ["starmap_next", "functools_reduce"], args.repo, tmp, {"KCOORD_WRITE_PATH_COUNTS": str(counts)}, 3000)
        if profile:
            shutil.copy(out, profile)
        commits, batches, requests = (int(x) for x in counts.read_text().split())
        return total, commits, batches, requests


def _fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares y = a + b x over (x, y): (a, b)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - b * mx, b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits-per-write", default="1,10,100",
                        help="K, commits per batch (comma-separated: one run each)")
    parser.add_argument("--shards", type=int, default=1, help="state topic partitions written per round")
    parser.add_argument("--partitions", type=int, default=4, help="partitions per commit (1-10)")
    parser.add_argument("--commits", type=int, default=600, help="commits measured per run (rounded up)")
    parser.add_argument("--state", default="topic,acking", help="topic (the real write path), acking, or both")
    parser.add_argument("--repo", type=Path, default=BENCH.parent)
    parser.add_argument("--profile", default=None, help="keep the last run's callgrind output here")
    parser.add_argument("--plain", action="store_true", help="run once without valgrind and check the answers")
    parser.add_argument("--cprofile", default=None, help="with --plain: cProfile the measured rounds into FILE")
    args = parser.parse_args()
    args.repo = args.repo.resolve()
    if args.plain:
        sys.path[:0] = [str(args.repo), str(BENCH), str(args.repo / "bench")]
        args.commits_per_write = int(args.commits_per_write)
        _run(args)
        return
    ks = [int(k) for k in args.commits_per_write.split(",")]
    fits: dict[str, tuple[float, float]] = {}
    for state in args.state.split(","):
        points = []
        for k in ks:
            total, commits, batches, requests = _count(args, k, state, args.profile)
            points.append((commits / batches, total / batches))
            print(f"{state:6} K={k:<3} {total / commits:>9,.0f} per commit {total / batches:>10,.0f} per batch "
                  f"{total / requests:>10,.0f} per request  ({commits} commits, {batches} batches, "
                  f"{requests} requests, {total:,} instructions)", flush=True)
        if len(points) > 1:
            fits[state] = _fit(points)
            print(f"{state:6} fit: {fits[state][0]:,.0f} fixed per batch + {fits[state][1]:,.0f} per commit",
                  flush=True)
    if "topic" in fits and "acking" in fits:
        (ft, ct), (fa, ca) = fits["topic"], fits["acking"]
        print(f"write path: {ft - fa:,.0f} fixed per batch + {ct - ca:,.0f} per commit "
              f"({args.repo}; {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
