"""Time from a membership change to every member stable: client assignors beside the server assignor (issue 17 §5).

    nice -n 19 .venv/bin/python bench/bench_client_assignors.py [--members 10,1000] [--runs 1]
        [--modes server,client] [--profile FILE] [--repos PATH,PATH...]

Rules of this bench:
- Sans IO, as tests/unit/group drive the core: one GroupCoordinatorShard, a simulated clock,
  and members from the member library (members/consumer.py) heartbeating at the intervals
  the heartbeat policy gives them (kcoord's defaults). Client-mode members carry the sample
  sticky assignor; the asked member runs Prepare -> assign -> Install at once. Requests are
  answered at the instant they are sent (no simulated network): "simulated ms" is the
  protocol's own rounds at the policy's intervals.
- Every record goes through the real codec and replay, as the runtime writes and reloads it.
- "core CPU" is process time spent inside the shard (requests, timers, replay, and the
  private-API answer builders), not in the members or the assignor: the coordinator's cost.
- One topic with 2 x members partitions. The group is formed and stable first (not
  measured); then a member joins, the group settles again, then a member leaves gracefully.
  Stable = the group is STABLE at an assignment epoch equal to its group epoch, and every
  member's own view is STABLE at that epoch.
- Server and client mode run in the same process, one after the other, per size.
- ``--repos``: before/after in one run: the same scenarios against each source tree (a
  checkout or copy of this repository), one subprocess each, this bench file unchanged.
"""
from __future__ import annotations

import argparse
import cProfile
import heapq
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.environ.get("BENCH_REPO") or str(Path(__file__).resolve().parents[1]))

from coordinator import private_apis  # noqa: E402
from coordinator.config import CoordinatorConfig  # noqa: E402
from coordinator.group.image import MetadataImage, TopicImage  # noqa: E402
from coordinator.group.modern.consumer.group import ConsumerGroupState  # noqa: E402
from coordinator.group.result import CancelTimer, Result, ScheduleTimer  # noqa: E402
from coordinator.group.shard import GroupCoordinatorShard, RequestContext  # noqa: E402
from coordinator.protocol import private_messages as pm  # noqa: E402
from members.consumer import Assign, Compute, ConsumerMember, Revoke, State  # noqa: E402
from members.sticky import StickyAssignor  # noqa: E402
from records import decode_record, encode_key, encode_value  # noqa: E402

GROUP, TOPIC = "bench", "t"
CTX1, CTX0 = (RequestContext(api_version=v, client_id="bench", client_host="/127.0.0.1") for v in (1, 0))


class Sim:
    """The shard, its state topic (records encoded, decoded and replayed) and its timers."""

    def __init__(self, partitions: int, config: CoordinatorConfig) -> None:
        t = TopicImage(topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, TOPIC), name=TOPIC, num_partitions=partitions)
        self.shard = GroupCoordinatorShard(0, config, MetadataImage.of([t]))
        self.now = 1_000_000
        self.timers: dict[tuple, tuple[int, object]] = {}
        self.offset = 0
        self.cpu = 0.0

    def _apply(self, result: Result) -> Result:
        for record in result.records:
            key, value = encode_key(record.key), encode_value(record.value, record.value_version)
            if result.replay:
                self.shard.replay(decode_record(key, value, topic="__bench", partition=0, offset=self.offset),
                                  self.offset)
            self.offset += 1
        for t in result.timers:
            if isinstance(t, ScheduleTimer):
                self.timers[t.key] = (t.deadline_ms, t.payload)
            elif isinstance(t, CancelTimer):
                self.timers.pop(t.key, None)
        return result

    def call(self, fn, *args):
        """Run one core operation and its records' replay, counting its CPU time."""
        c0 = time.process_time()
        out = self._apply(fn(*args))
        self.cpu += time.process_time() - c0
        return out

    def heartbeat(self, req):
        if isinstance(req, pm.CsaHeartbeatRequest):
            r = self.call(self.shard.consumer_group_csa_heartbeat, CTX1, req, self.now).response
            c0 = time.process_time()
            resp = private_apis.csa_response(r)
            self.cpu += time.process_time() - c0
            return resp
        return self.call(self.shard.consumer_group_heartbeat, CTX1, req, self.now).response

    def next_timer(self) -> int | None:
        return min((d for d, _ in self.timers.values()), default=None)

    def fire_due(self) -> None:
        while True:
            due = [(d, k) for k, (d, _) in self.timers.items() if d <= self.now]
            if not due:
                return
            _, key = min(due)
            _, payload = self.timers.pop(key)
            self.call(self.shard.on_timer, key, payload, self.now)


class Fleet:
    """The members, polled in next-heartbeat order (a heap, so 1,000 members stay cheap)."""

    def __init__(self, sim: Sim, client: bool) -> None:
        self.sim, self.client = sim, client
        self.members: dict[str, ConsumerMember] = {}
        self.heap: list[tuple[int, str]] = []
        self.installs = 0

    def add(self, member_id: str) -> ConsumerMember:
        m = ConsumerMember(GROUP, [TOPIC], member_id=member_id, rebalance_timeout_ms=30_000,
                           assignors=[StickyAssignor()] if self.client else ())
        self.members[member_id] = m
        heapq.heappush(self.heap, (self.sim.now, member_id))
        return m

    def handle(self, m: ConsumerMember, actions: list) -> None:
        now = self.sim.now
        while actions:
            a = actions.pop(0)
            if isinstance(a, Revoke):
                actions.extend(m.revoked(now))
            elif isinstance(a, Assign):
                actions.extend(m.assigned(now))
            elif isinstance(a, Compute):
                self.compute(m)

    def compute(self, m: ConsumerMember) -> None:
        sim = self.sim
        answer = sim.call(sim.shard.consumer_group_prepare_assignment, CTX0, m.prepare_request(), sim.now).response
        c0 = time.process_time()
        prepared = private_apis.prepare_response(answer)
        sim.cpu += time.process_time() - c0
        install = m.on_prepare(prepared)            # the assignor: member CPU, not counted
        if install is None:
            return
        done = sim.call(sim.shard.consumer_group_install_assignment, CTX0, install, sim.now).response
        c0 = time.process_time()
        private_apis.install_response(done)
        sim.cpu += time.process_time() - c0
        assert done.error_code == 0, done
        self.installs += 1

    def stable(self) -> bool:
        g = self.sim.shard.groups.get(GROUP)
        # The members' own view is checked only once the coordinator's is settled (O(n)).
        return (g is not None and g.state is ConsumerGroupState.STABLE and g.assignment_epoch == g.group_epoch
                and len(g.members) == len(self.members)
                and all(m.state is State.STABLE and m.member_epoch == g.group_epoch for m in self.members.values()))

    def run_until_stable(self, limit_ms: int = 120_000) -> int:
        """Deliver heartbeats and timers in time order until stable; the simulated ms taken."""
        sim, start = self.sim, self.sim.now
        while not self.stable():
            t = sim.next_timer()
            nxt = self.heap[0][0] if self.heap else None
            sim.now = max(sim.now, min(x for x in (t, nxt) if x is not None))
            if sim.now - start > limit_ms:
                raise TimeoutError(f"not stable after {limit_ms} ms")
            sim.fire_due()
            while self.heap and self.heap[0][0] <= sim.now:
                _, mid = heapq.heappop(self.heap)
                m = self.members.get(mid)
                if m is None:
                    continue
                req = m.poll(sim.now)
                if req is None:
                    if m.state is not State.LEFT:
                        heapq.heappush(self.heap, (max(m.next_poll_ms, sim.now + 1), mid))
                    continue
                self.handle(m, m.on_heartbeat(sim.heartbeat(req), sim.now))
                if m.state is State.LEFT:
                    del self.members[mid]
                else:
                    heapq.heappush(self.heap, (max(m.next_poll_ms, sim.now + 1), mid))
        return sim.now - start

    def leave(self, member_id: str) -> None:
        m = self.members[member_id]
        self.handle(m, m.leave(self.sim.now))
        heapq.heappush(self.heap, (self.sim.now, member_id))


def scenario(n: int, client: bool) -> dict:
    sim = Sim(2 * n, CoordinatorConfig())
    fleet = Fleet(sim, client)
    for i in range(n):
        fleet.add(f"m{i:05d}")
    form_ms = fleet.run_until_stable(600_000)
    out: dict = {"form": (form_ms, sim.cpu)}
    for change in ("join", "leave"):
        cpu0 = sim.cpu
        if change == "join":
            fleet.add("joiner")
        else:
            fleet.leave("m00000")
        ms = fleet.run_until_stable()
        out[change] = (ms, sim.cpu - cpu0)
    out["installs"] = fleet.installs
    if client:
        assert sim.shard.groups[GROUP].client_assignor_name == StickyAssignor.name
    else:
        assert sim.shard.groups[GROUP].client_assignor_name is None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--members", default="10,1000")
    ap.add_argument("--modes", default="server,client")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--profile", help="write a cProfile of the last scenario to this file")
    ap.add_argument("--repos", help="comma-separated source trees to compare, one subprocess each")
    args = ap.parse_args()
    if args.repos:
        rest = [a for a in sys.argv[1:] if not a.startswith("--repos")]
        if "--repos" in sys.argv:
            i = sys.argv.index("--repos")
            rest = sys.argv[1:i] + sys.argv[i + 2:]
        for repo in args.repos.split(","):
            print(f"## {repo}", flush=True)
            subprocess.run([sys.executable, __file__, *rest], env={**os.environ, "BENCH_REPO": repo}, check=True)
        return
    d = CoordinatorConfig()
    repo = Path(sys.modules["coordinator"].__file__ or "").parents[1]
    print(f"# {repo}: sans-IO core, kcoord defaults (stable {d.consumer_heartbeat_stable_interval_ms} ms, "
          f"assignment interval {d.consumer_assignment_interval_ms} ms); partitions = 2 x members")
    print(f"{'members':>7} {'mode':>6} {'change':>6} {'simulated ms':>12} {'core CPU ms':>11}")
    for n in (int(x) for x in args.members.split(",")):
        for mode in args.modes.split(","):
            for _ in range(args.runs):
                prof = cProfile.Profile() if args.profile else None
                if prof:
                    prof.enable()
                r = scenario(n, mode == "client")
                if prof:
                    prof.disable()
                    prof.dump_stats(args.profile)
                for change in ("form", "join", "leave"):
                    ms, cpu = r[change]
                    print(f"{n:>7} {mode:>6} {change:>6} {ms:>12} {cpu * 1000:>11.1f}", flush=True)


if __name__ == "__main__":
    main()
