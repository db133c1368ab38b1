"""A plain `kcoord serve`'s lease (coordinator/cluster/solo.py, clustered.SoloWatch): once its
watch's group admitted it, it answers and writes only while the watch's lease holds; a
watcher whose lease ran out or that the group dropped asks again as a candidate, yields to
a successor (exit 4) or is admitted again and reloads before answering; a watch that cannot
run leaves the process unwatched, serving as before. The membership is driven by a scripted
link (test_membership_replacement.py); the service gate by the real service over a fake log."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode

from coordinator import clustered
from coordinator.cluster.balancer import NOT_ALONE
from coordinator.cluster.lease import Lease
from coordinator.cluster.membership import ClusterMembership
from coordinator.cluster.protocol import Assignment, Endpoint, decode_metadata
from coordinator.cluster.solo import LeaseGatedLog, LeaseLapsed, SoloLease
from coordinator.config import CoordinatorConfig

from ..runtime.fakes import FakeStateTopic, group_in
from ..runtime.test_shard_failures import commit, commit_errors, committed, fetch, service_for
from .test_membership_replacement import Clock, ScriptedLink, drive, heartbeat, join, sync

SESSION_MS = 1_500     # a 1.2 s lease: a loaded machine's stalls stay inside it
ADMITTED = sync(Assignment(5, frozenset()))
OTHER = Endpoint("127.0.0.1", 9300)
REFUSED = sync(Assignment(6, frozenset(), {}, {"solo-other": OTHER}, {}, error=NOT_ALONE))


class Watcher:
    """What SoloLease reads of a watcher's membership: its candidacy and its lease."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lease = Lease(3_000, 1_000)
        self.solo_candidate = False

    def serving(self, now: float | None = None) -> bool:
        return self.lease.valid(self.clock() * 1000)


# ------------------------------------------------------------------ the gate itself
def test_the_gate_is_the_lease_once_watched_and_none_while_unwatched():
    clock = Clock()
    watcher = Watcher(clock)
    lease = SoloLease(watcher)
    assert lease.serving() and lease.gate() is None          # unwatched: as before, no check per request
    lease.watched = True
    assert lease.gate() == lease.serving and not lease.serving()    # admitted, no renewal yet
    watcher.lease.renew(clock() * 1000)
    assert lease.serving()
    clock.now += 2.5                                         # a pause past the lease (3 s - 1 s margin)
    assert not lease.serving()
    watcher.lease.renew(clock() * 1000)
    watcher.solo_candidate = True                            # dropped by the group: asks again
    assert not lease.serving()
    watcher.solo_candidate = False
    lease.reloading = True                                   # admitted again: reload first
    assert not lease.serving()
    lease.watched = False
    assert not lease.serving() and lease.gate() == lease.serving    # unwatched, but still reloading
    lease.reloading = False
    assert lease.serving() and lease.gate() is None
    lease.stopped = True                                     # leaving the group, watched or not
    assert not lease.serving() and lease.gate() == lease.serving


def test_a_paused_plain_serve_answers_not_coordinator_and_sends_no_write():
    """The real service over a gated fake log: once the lease ran out, a commit is neither
    sent nor acknowledged and a read answers NOT_COORDINATOR; the shard reloads from the log."""
    topic = FakeStateTopic(4)
    group = group_in(1, 4, "g")
    topic.commit(group, "t", 0, 3)
    clock = Clock()
    watcher = Watcher(clock)
    lease = SoloLease(watcher)
    lease.watched = True
    watcher.lease.renew(clock() * 1000)

    async def run():
        service = service_for(LeaseGatedLog(topic, lease.serving))  # type: ignore[arg-type]
        service.serving = lease.gate()
        await service.start()
        try:
            assert commit_errors(await commit(service, group, "t", 0, 4)) == {ErrorCode.none}
            written = topic.append_calls
            clock.now += 2.5
            assert commit_errors(await commit(service, group, "t", 0, 5)) == {ErrorCode.not_coordinator}
            assert topic.append_calls == written
            assert (await fetch(service, group)).error_code == ErrorCode.not_coordinator
            watcher.lease.renew(clock() * 1000)
            for _ in range(2_000):
                if committed(await fetch(service, group)) == {("t", 0): 4}:
                    break
                await asyncio.sleep(0.001)
            assert committed(await fetch(service, group)) == {("t", 0): 4}     # 5 was never written
        finally:
            service.close()

    asyncio.run(run())


def test_the_gated_log_asks_before_every_send_and_passes_the_rest():
    sent: list[str] = []

    class Log:
        topic = "__kc"
        partitions = 4

        async def append(self, partition, records, timestamp_ms):
            sent.append("append")
            return 7

        async def call_leader(self, partition, request):
            sent.append("leader")

        async def call_transaction_coordinator(self, transactional_id, request):
            sent.append("txn")

        async def takeover(self, partition):
            sent.append("take")

    allowed = [True]
    gated = LeaseGatedLog(Log(), lambda: allowed[0])

    async def run():
        assert await gated.append(0, [], 0) == 7
        await gated.call_leader(0, None)
        await gated.call_transaction_coordinator("tx", None)
        await gated.takeover(0)
        allowed[0] = False
        for send in (gated.append(1, [], 0), gated.call_leader(1, None), gated.call_transaction_coordinator("t", None),
                     gated.takeover(1)):
            with pytest.raises(LeaseLapsed, match="__kc"):
                await send

    asyncio.run(run())
    assert sent == ["append", "leader", "txn", "take"]
    assert (gated.topic, gated.partitions) == ("__kc", 4)
    assert LeaseGatedLog(FakeStateTopic(4), lambda: True).takeover is None    # a plain log loads without one


def test_the_gated_logs_append_then_asks_before_every_send_and_refuses_on_a_later_turn():
    """The lean writer's path (runtime/partition_writer.py's `append_then`) is gated as
    `append` is: refused, the outcome is a LeaseLapsed handed over on a later loop turn
    (never from inside the call) and nothing reaches the wrapped log."""
    sent: list[int] = []
    outcomes: list[tuple[int, BaseException | None]] = []

    class Log:
        topic = "__kc"

        def append_then(self, partition, records, timestamp_ms, then):
            sent.append(partition)
            then(7, None)

    allowed = [True]
    gated = LeaseGatedLog(Log(), lambda: allowed[0]).append_then
    assert gated is not None

    async def run():
        gated(0, [], 0, lambda base, error: outcomes.append((base, error)))
        allowed[0] = False
        gated(1, [], 0, lambda base, error: outcomes.append((base, error)))
        assert len(outcomes) == 1, "refused: handed over on a later turn"
        await asyncio.sleep(0)

    asyncio.run(run())
    assert sent == [0] and outcomes[0] == (7, None)
    assert outcomes[1][0] == -1 and isinstance(outcomes[1][1], LeaseLapsed) and "__kc" in str(outcomes[1][1])
    assert LeaseGatedLog(FakeStateTopic(4), lambda: True).append_then is None, "a log without one: append"


# ------------------------------------------------------------------ the watcher's membership
async def _watcher(script: dict, until, clock: Clock, heartbeat_ms: int):
    ref: list = []
    link = ScriptedLink(ref, script)
    candidates: list[float] = []

    async def open_link(addresses):
        return link

    m = ClusterMembership(group_id="kcoord.t", instance_id="solo-a", endpoint=OTHER, n_shards=4, open_link=open_link,
                          bootstrap=[("127.0.0.1", 1)], session_ms=3_000, heartbeat_ms=heartbeat_ms,
                          lease_margin_ms=1_000, static=False, clock=clock, on_change=lambda *_: None,
                          solo_since_ms=1, on_candidate=lambda: candidates.append(m.candidate_since))
    ref.append(m)
    await drive(m, link, until)
    return m, link, candidates


def _joins(link) -> list:
    return [decode_metadata(req.protocols[0].metadata) for api, req, _ in link.sent if api == "JoinGroup"]


@pytest.mark.parametrize("lapsed", [False, True])
def test_a_serving_watcher_whose_lease_ran_out_joins_again_as_a_candidate(lapsed):
    clock = Clock()
    script = {"JoinGroup": [join(generation=5, leader="x"), join(generation=6, leader="x")],
              "SyncGroup": [ADMITTED, sync(Assignment(6, frozenset()))]}
    state = {"rejoined": False}

    def until(m, link):
        if m.stable.is_set() and not state["rejoined"]:
            state["rejoined"] = True
            m.solo_candidate = False          # its process serves (SoloWatch.check)
            if lapsed:
                clock.now += 2.5              # a pause past the lease
            m.request_rejoin()
        return len(_joins(link)) == 2

    m, link, candidates = asyncio.run(_watcher(script, until, clock, heartbeat_ms=10_000))
    first, second = _joins(link)
    assert first.solo_candidate and second.solo_candidate is lapsed
    assert candidates == ([clock.now] if lapsed else [])


def test_a_serving_watcher_the_group_dropped_drops_its_lease_and_asks_again_as_a_candidate():
    clock = Clock()
    script = {"JoinGroup": [join(generation=5, leader="x"), join(member="again", generation=7, leader="x")],
              "SyncGroup": [ADMITTED], "Heartbeat": [heartbeat(ErrorCode.unknown_member_id)]}

    def until(m, link):
        if m.stable.is_set() and m.solo_candidate:
            m.solo_candidate = False          # its process serves
        return len(_joins(link)) == 2

    m, link, candidates = asyncio.run(_watcher(script, until, clock, heartbeat_ms=5))
    assert [j.solo_candidate for j in _joins(link)] == [True, True]
    assert len(candidates) == 1 and m.solo_candidate
    joins = [(req, serving) for api, req, serving in link.sent if api == "JoinGroup"]
    assert joins[1][0].member_id == "" and not joins[1][1]    # a new member, its lease dropped before it asked


# ------------------------------------------------------------------ SoloWatch, wired
CONFIG = CoordinatorConfig(state_topic="t", state_topic_partitions=4, cluster_session_timeout_ms=SESSION_MS,
                           cluster_lease_margin_ms=300, cluster_heartbeat_interval_ms=50,
                           cluster_rebalance_timeout_ms=1_000)
GATEWAY = SimpleNamespace(listeners=[SimpleNamespace(listener="PLAINTEXT", host="127.0.0.1", port=9092, node_id=None)])
FOUND = SimpleNamespace(error_code=ErrorCode.none, host="127.0.0.1", port=1)
LEFT = SimpleNamespace(error_code=ErrorCode.none)


class Service:
    """What SoloWatch touches of the service: its response gate and reload_all."""

    def __init__(self) -> None:
        self.serving = None
        self.runtimes: list = []
        self.reloads = 0
        self.reloaded = asyncio.Event()

    async def reload_all(self, reason: str) -> bool:
        self.reloads += 1
        await self.reloaded.wait()
        return True


async def _solo(monkeypatch, script: dict, timeout_s: float = 2.0, link_type: type = ScriptedLink):
    ref: list = []
    link = link_type(ref, {"FindCoordinator": [FOUND, FOUND], "LeaveGroup": [LEFT], **script})

    async def scripted_open(security, client_id, addresses):
        return link

    monkeypatch.setattr(clustered, "_open", scripted_open)
    watch = clustered.SoloWatch(CONFIG, "127.0.0.1:1", None)
    ref.append(watch)
    service = Service()
    served = await watch.check(GATEWAY, timeout_s, service=service)
    return watch, link, service, served


async def _until(condition, what: str, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"not reached within {seconds}s: {what}")


def test_a_woken_plain_serve_answers_nothing_yields_to_its_successor_and_stops(monkeypatch):
    script = {"JoinGroup": [join(generation=5, leader="x"), join(generation=5, leader="x"),
                            join(member="again", generation=8, leader="x"), join(member="again", generation=9,
                                                                                 leader="x")],
              "SyncGroup": [ADMITTED, ADMITTED, REFUSED, REFUSED],
              "Heartbeat": [heartbeat(ErrorCode.unknown_member_id)]}

    async def run():
        watch, link, service, served = await _solo(monkeypatch, script)
        assert served and service.serving is not None and service.serving()
        m = watch.membership
        await _until(lambda: len(_joins(link)) >= 2, "it tells the group it serves")
        if m.lease.renewed_ms is not None:
            m.lease.renewed_ms -= SESSION_MS      # a pause past the lease
        assert not service.serving()
        with pytest.raises(LeaseLapsed):
            await watch.gated(FakeStateTopic(4)).append(0, [], 0)
        answers: list[bool] = []
        await _until(lambda: answers.append(service.serving()) or watch.stop.is_set(), "it stops")
        assert watch.exit_code == clustered.EXIT_NOT_ALONE and not any(answers) and service.reloads == 0
        assert [j.solo_candidate for j in _joins(link)] == [True, False, True, True]

    asyncio.run(run())


def test_a_plain_serve_admitted_again_reloads_before_it_answers(monkeypatch):
    script = {"JoinGroup": [join(generation=5, leader="x"), join(generation=5, leader="x"),
                            join(member="again", generation=8, leader="x"), join(member="again", generation=8,
                                                                                 leader="x")],
              "SyncGroup": [ADMITTED, ADMITTED, sync(Assignment(8, frozenset())), sync(Assignment(8, frozenset()))],
              "Heartbeat": [heartbeat(ErrorCode.unknown_member_id), *(heartbeat() for _ in range(400))]}

    async def run():
        watch, link, service, _ = await _solo(monkeypatch, script)
        await _until(lambda: service.reloads == 1, "the reload on its admission")
        assert not service.serving() and not watch.stop.is_set()
        service.reloaded.set()
        await _until(lambda: service.serving is not None and service.serving(), "serving once reloaded")
        await _until(lambda: len(_joins(link)) == 4, "it tells the group it serves again")
        assert [j.solo_candidate for j in _joins(link)] == [True, False, True, False]
        await watch.leave()

    asyncio.run(run())


def test_a_plain_serve_stops_answering_and_drains_before_its_leave_group(monkeypatch):
    """The group admits a successor once the LeaveGroup lands: nothing is answered or sent
    from before it, and the writes in flight finish first."""
    script = {"JoinGroup": [join(generation=5, leader="x"), join(generation=5, leader="x")],
              "SyncGroup": [ADMITTED, ADMITTED], "Heartbeat": [heartbeat() for _ in range(400)]}
    drained: list[bool] = []

    class Runtime:
        async def drain(self, timeout_s: float) -> bool:
            drained.append(service.serving())
            return True

    async def run():
        nonlocal service
        watch, link, service, _ = await _solo(monkeypatch, script)
        service.runtimes = [Runtime(), Runtime()]
        await _until(lambda: len(_joins(link)) == 2, "it tells the group it serves")
        assert service.serving()
        await watch.leave()
        leaves = [serving for api, _, serving in link.sent if api == "LeaveGroup"]
        assert leaves == [False] and drained == [False, False] and not service.serving()

    service = None
    asyncio.run(run())


def test_a_watch_without_rights_on_the_group_leaves_the_process_serving_unwatched(monkeypatch):
    script = {"JoinGroup": [join(error=ErrorCode.group_authorization_failed)]}

    async def run():
        watch, _, service, served = await _solo(monkeypatch, script)
        assert served and service.serving is None and watch.serving()
        await watch.leave()

    asyncio.run(run())


def test_no_verdict_in_time_serves_unwatched_and_a_later_verdict_gives_the_lease(monkeypatch):
    held = asyncio.Event()

    class Held(ScriptedLink):
        async def request(self, request, timeout=None):
            if type(request).__name__ == "JoinGroupRequest" and not held.is_set():
                await held.wait()             # the group gives no verdict yet
            return await super().request(request, timeout)

    async def run():
        watch, _, service, served = await _solo(monkeypatch, {
            "SyncGroup": [ADMITTED, ADMITTED], "JoinGroup": [join(generation=5, leader="x"),
                                                            join(generation=5, leader="x")]}, 0.05, Held)
        assert served and service.serving is None
        held.set()
        await _until(lambda: service.serving is not None, "the lease once the verdict came")
        assert service.serving()
        await watch.leave()

    asyncio.run(run())


def test_a_candidate_again_without_a_verdict_reloads_and_serves_unwatched(monkeypatch):
    script = {"JoinGroup": [join(generation=5, leader="x"), join(generation=5, leader="x")],
              "SyncGroup": [ADMITTED, ADMITTED], "Heartbeat": [heartbeat(ErrorCode.unknown_member_id)]}

    async def run():
        watch, _, service, _ = await _solo(monkeypatch, script, timeout_s=0.3)
        await _until(lambda: watch.membership.solo_candidate, "a candidate again")
        assert not service.serving()
        await _until(lambda: service.reloads == 1, "the reload once no verdict came")
        assert not service.serving()
        service.reloaded.set()
        await _until(lambda: service.serving is None, "serving unwatched")
        assert watch.serving() and not watch.stop.is_set()
        await watch.leave()

    asyncio.run(run())
