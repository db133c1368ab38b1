"""The quiet hold's trickle ends once it is full (membership.filled), on the simulated clock:
when the group's current target is over floor(tasks / k) members (two at least), every
member's share is at least k, handing the rest of each target moves nothing, and one member
more would make shares fall below k anyway; so the rest goes out at once (the joining
member's answer, the others' next heartbeats), not one quiet period after the last join. A
lone member, a target not yet over the members present, and fewer members than the trickle
is sized for keep the hold as before."""
from __future__ import annotations

import random

from coordinator.group.streams.membership import filled, soft_of
from coordinator.group.streams.model import MemberState, StreamsGroupState

from .driver import Driver, image, subtopology, topology
from .test_heartbeat import App, _never_active_twice

# the benchmark's application: three subtopologies of 32 partitions, 96 tasks; k = 9 = floor(96 / 10)
TOP3 = topology(subtopology("0", sources=["input"], sinks=["rep1"]),
                subtopology("1", repartition=["rep1"], sinks=["rep2"], changelogs=["app-count-changelog"]),
                subtopology("2", repartition=["rep2"], changelogs=["app-count2-changelog"]))
IMG3 = image(input=32, rep1=32, rep2=32, **{"app-count-changelog": 32, "app-count2-changelog": 32})
QUIET_MS = 1_500


def _driver(img=IMG3, k: int = 9, **kw) -> Driver:
    return Driver(img, **{"streams_initial_rebalance_delay_ms": 0, "streams_assignment_interval_ms": 0,
                          "streams_initial_rebalance_quiet_ms": QUIET_MS,
                          "streams_initial_rebalance_quiet_tasks": k, **kw})


class Watch:
    """Every member's active tasks after each step: none may ever lose one (no revocation),
    and no task may be active twice."""

    def __init__(self, d: Driver) -> None:
        self.d = d
        self.held: dict[str, frozenset] = {}

    def check(self) -> None:
        _never_active_twice(self.d)
        for m in self.d.group().members.values():
            assert m.state is not MemberState.UNREVOKED_TASKS, m.member_id
            assert self.held.get(m.member_id, frozenset()) <= m.assigned.active, m.member_id
            self.held[m.member_id] = m.assigned.active


def _loads(d: Driver) -> list[int]:
    return sorted(len(m.assigned.active) for m in d.group().members.values())


def test_the_tenth_join_of_96_tasks_at_k_9_ends_the_hold_and_hands_every_target_in_full():
    d = _driver()
    app, watch = App(d), Watch(d)
    for i in range(9):
        app.join(f"m{i}", f"p{i}", TOP3)
        d.advance(100)
        app.settle(1)
        watch.check()
        assert soft_of(d.shard, "app").quiet_hold is not None       # 9 members: floor(96 / 9) = 10 > 9
        assert max(_loads(d)) == 9
    last = app.join("m9", "p9", TOP3)
    assert soft_of(d.shard, "app").quiet_hold is None
    group = d.group()
    assert last.tasks() == group.target["m9"].active                 # its whole target in its join answer
    watch.check()
    app.settle(1)                                                    # each other member's next heartbeat
    watch.check()
    group = d.group()
    assert group.state() is StreamsGroupState.STABLE
    assert _loads(d) == [9] * 4 + [10] * 6
    assert len(set().union(*(m.assigned.active for m in group.members.values()))) == 96


def test_members_that_joined_before_the_validation_get_their_whole_targets_at_it():
    """Ten members joined while the internal topics did not exist yet: the validation's target
    is over ten members, the trickle is full at once, each gets its whole target."""
    d = _driver()
    d.shard.image = image(input=32)
    app, watch = App(d), Watch(d)
    for i in range(10):
        assert app.join(f"m{i}", f"p{i}", TOP3).tasks() == set()
        d.advance(50)
    d.shard.image = IMG3
    app.settle(2)
    watch.check()
    assert soft_of(d.shard, "app").quiet_hold is None
    assert d.group().state() is StreamsGroupState.STABLE
    assert _loads(d) == [9] * 4 + [10] * 6


def test_a_lone_member_stays_capped_until_the_quiet_period_ends_even_when_k_is_half_the_tasks():
    """k = 60 of 96: floor(96 / 60) = 1, yet one member is no evidence that the start is over."""
    d = _driver(k=60)
    app = App(d)
    assert len(app.join("m0", "p0", TOP3).tasks()) == 60
    d.advance(QUIET_MS - 100)
    app.settle(1)
    assert soft_of(d.shard, "app").quiet_hold is not None
    assert _loads(d) == [60]
    d.advance(100)
    app.settle(1)
    assert _loads(d) == [96]


def test_fewer_members_than_the_trickle_is_sized_for_keep_the_hold():
    d = _driver()
    app = App(d)
    for i in range(5):
        app.join(f"m{i}", f"p{i}", TOP3)
        d.advance(200)
        app.settle(1)
    assert soft_of(d.shard, "app").quiet_hold is not None
    assert _loads(d) == [9] * 5
    d.advance(QUIET_MS)
    app.settle(2)
    assert _loads(d) == [19, 19, 19, 19, 20]


def test_a_target_not_yet_over_the_members_present_does_not_end_the_hold():
    """With an assignment interval the tenth join's target waits: the hold ends at the first
    heartbeat after the target over ten members is computed, not on the member count alone
    (the older target over nine would hand out up to 11 tasks that the next one takes back)."""
    d = _driver(streams_assignment_interval_ms=1_000)
    app, watch = App(d), Watch(d)
    for i in range(10):
        app.join(f"m{i}", f"p{i}", TOP3)
        d.advance(10)
        app.settle(1)
        watch.check()
    group = d.group()
    assert group.target_assignment_epoch < group.group_epoch
    assert soft_of(d.shard, "app").quiet_hold is not None
    d.advance(1_000)                                    # the assignment timer computes the target over ten
    app.settle(2)
    watch.check()
    assert soft_of(d.shard, "app").quiet_hold is None
    assert d.group().state() is StreamsGroupState.STABLE and _loads(d) == [9] * 4 + [10] * 6


def test_random_starts_never_revoke_and_end_the_hold_at_the_filling_join():
    """Random join orders and heartbeats, 1 to 3 subtopologies, one or two members per process,
    k = floor(tasks / members): no member ever loses a task, no task is active twice, the hold
    ends with the join that fills the trickle (when the members reach floor(tasks / k): not
    always n, e.g. 12 tasks over 5 members, k = 2), and the group is then stable before the
    quiet period of the last join is over."""
    rng = random.Random(20261130)
    for _ in range(40):
        subs, partitions, n = rng.randint(1, 3), rng.choice((4, 8, 12, 32)), rng.randint(2, 12)
        tasks = subs * partitions
        if tasks < 2 * n:
            continue
        k = tasks // n
        names = [f"s{j}" for j in range(subs)]
        top = topology(*(subtopology(str(j), sources=[names[j]], changelogs=[f"app-c{j}-changelog"])
                         for j in range(subs)))
        d = _driver(image(**{nm: partitions for nm in names},
                          **{f"app-c{j}-changelog": partitions for j in range(subs)}), k=k)
        app, watch = App(d), Watch(d)
        per_process = rng.choice((1, 2))
        for i in range(n):
            app.join(f"m{i:02d}", f"p{i // per_process}", top)
            for m in rng.sample(sorted(app.epoch), rng.randint(0, len(app.epoch))):
                app.beat(m)
                watch.check()
            ended = soft_of(d.shard, "app").quiet_hold is None
            assert ended is (i + 1 >= max(2, tasks // k)), (subs, partitions, n, i)
            d.advance(rng.randint(0, 300))
        if n < tasks // k:
            d.advance(QUIET_MS)                 # not full: the quiet period ends the hold, as before
        app.settle(3)
        watch.check()
        assert d.group().state() is StreamsGroupState.STABLE, (subs, partitions, n)
        loads = _loads(d)
        assert sum(loads) == tasks and loads[-1] - loads[0] <= 1, (subs, partitions, n, loads)


def test_filled():
    assert not filled(9, 9, 96) and filled(9, 10, 96) and filled(9, 11, 96)
    assert not filled(60, 1, 96) and filled(60, 2, 96)
    assert not filled(9, 0, 96)                                      # a newer target is due
