"""CPU per steady heartbeat through the coordinator's code, without sockets.

    PYTHONPATH=<repo> python -m loadgen.inproc [--members 1000] [--groups 10] [--requests 200000]
        [--cluster]

Run from bench/ (bench_heartbeat.py --in-process does it, for any checkout given with
--repo). The GroupCoordinatorService runs against a state topic stub that acknowledges
every write at once; members join through `service.handle`; then steady heartbeats go
through what the gateway does for each: decode the request body (kio), run
`service.handle` to completion (it never suspends in steady state), encode the answer
and frame it. The loop's own cost is measured separately and subtracted. Socket reads,
writes and wake-ups are not included: this is the part of a request that code changes
in the service, runtime and core move, measured on process CPU time so that other
load on the machine hardly matters.

``--cluster`` measures, in the same process and interleaved, the same heartbeats with the
service as a member of a kcoord cluster serves them (issue 14): its owned shards set and
the membership lease checked before every answer (coordinator/cluster/lease.py, the same
check as `Membership.serving`). That is everything a second process adds to a steady
heartbeat's path; the wire benchmark (bench_cluster_heartbeat.py) adds the machine's
contention on top.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import uuid

from coordinator.cluster.lease import Lease
from coordinator.config import CoordinatorConfig
from coordinator.group.image import MetadataImage, TopicImage
from coordinator.protocol.apis import request_class
from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.framing import request_body_offset, response_frame
from coordinator.protocol.service import ClientInfo
from coordinator.service import GroupCoordinatorService

from .consumer_member import ConsumerMember
from .wire import CONSUMER_GROUP_HEARTBEAT

TOPIC = "bench-inproc"


class AckingStateTopic:
    """Acknowledges every append at once at the next offsets (the runtime checks them)."""

    topic = "__kcoord_inproc"

    def __init__(self) -> None:
        self.next: dict[int, int] = {}

    async def append(self, partition: int, records: list, timestamp_ms: int) -> int:
        base = self.next.get(partition, 0)
        self.next[partition] = base + len(records)
        return base


async def main_async(args) -> None:
    config = CoordinatorConfig(state_topic_partitions=args.state_partitions)
    service = GroupCoordinatorService(config, AckingStateTopic())  # type: ignore[arg-type]
    image = MetadataImage.of([TopicImage(topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, TOPIC), name=TOPIC,
                                         num_partitions=args.partitions)])
    for rt in service.runtimes:
        rt.begin_load()
        rt.finish_load(0)
    service.on_metadata_update(image)
    client = ClientInfo("kcoord-loadgen", "127.0.0.1", 40000, "bootstrap")
    members = [ConsumerMember(f"g-{i % args.groups:04d}", (TOPIC,)) for i in range(args.members)]
    # Join and reconcile: heartbeat every member until none has anything to acknowledge.
    for _ in range(20):
        for m in members:
            response = await service.handle(CONSUMER_GROUP_HEARTBEAT, 1, m.next_request(), client)
            m.on_response(response)
        for rt in service.runtimes:
            for key in list(getattr(rt, "_timers", {})):
                if key and key[0] == "assignment":
                    rt.submit(lambda shard, now, key=key: shard.on_timer(key, None, now + 10_000))
        if all(m.is_steady() for m in members):
            break
    frames = [m.steady_template().with_correlation(i) for i, m in enumerate(members)]
    cls = request_class(CONSUMER_GROUP_HEARTBEAT, 1)
    _, body_offset = request_body_offset(frames[0], 2)

    async def one_pass(n: int, serve: bool) -> float:
        cpu = time.process_time()
        handle = service.handle
        for i in range(n):
            frame = frames[i % len(frames)]
            request = decode_body(cls, frame, body_offset)
            if serve:
                response = await handle(CONSUMER_GROUP_HEARTBEAT, 1, request, client)
                response_frame(i, encode_body(response), 1)
        return time.process_time() - cpu

    lease = Lease(session_ms=600_000, margin_ms=1_000)
    lease.renew(time.monotonic() * 1000)

    def cluster_mode(on: bool) -> None:
        service.owned = set(range(args.state_partitions)) if on else None
        service.serving = (lambda: lease.valid(time.monotonic() * 1000)) if on else None

    gc.collect()
    results = []
    clustered = []
    for _ in range(args.runs):
        for on, out in ((False, results), (True, clustered)) if args.cluster else ((False, results),):
            cluster_mode(on)
            base = await one_pass(args.requests, False)
            total = await one_pass(args.requests, True)
            out.append((total - base) / args.requests * 1e6)
    cluster_mode(False)
    errors = 0
    for frame in frames[:50]:
        response = await service.handle(CONSUMER_GROUP_HEARTBEAT, 1, decode_body(cls, frame, body_offset), client)
        errors += int(response.error_code) != 0
    print(f"in-process steady heartbeat: {statistics.median(results):.1f} us CPU per request "
          f"(runs {', '.join(f'{r:.1f}' for r in results)}; decode+serve+encode+frame, loop cost subtracted; "
          f"{args.members} members in {args.groups} groups; error answers in a sample: {errors})")
    if clustered:
        ratios = [c / p for c, p in zip(clustered, results)]
        print(f"  as a cluster member (owned shards, lease checked): {statistics.median(clustered):.1f} us "
              f"(runs {', '.join(f'{r:.1f}' for r in clustered)}); per-run ratio to the plain process: median "
              f"{statistics.median(ratios):.3f} ({', '.join(f'{r:.3f}' for r in ratios)})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--state-partitions", type=int, default=4)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cluster", action="store_true", help="also as a kcoord cluster member, interleaved")
    args = parser.parse_args()
    try:
        import uvloop
        uvloop.run(main_async(args))
    except ImportError:
        asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
