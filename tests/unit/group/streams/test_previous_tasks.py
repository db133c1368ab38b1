"""The sticky assignor starts from each member's current assignment, as Kafka 4.4 does
(`TargetAssignmentBuilder` hands it `StreamsGroupMember.assignedTasks()`, not the member's
target: docs/design/streams-groups.md, "The sticky assignor's placement"). A member that has
not yet revoked what an earlier target took from it still counts as holding it, and a member
that has not yet received what an earlier target gave it counts as holding nothing."""
from __future__ import annotations

from .driver import Driver, image, subtopology, topology
from .test_heartbeat import App

STATELESS = topology(subtopology("0", sources=["input"]))


def test_a_new_target_starts_from_what_members_hold_not_from_the_last_target():
    d = Driver(image(input=4), streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=0)
    app = App(d)
    app.join("m1", "p1", STATELESS)
    app.settle(2)
    assert app.held["m1"][0] == {("0", p) for p in range(4)}
    app.join("m2", "p3", STATELESS)        # its target 2 and 3, still held by m1, which has not beaten since
    assert d.group().target["m2"].active == {("0", 2), ("0", 3)}
    assert d.group().members["m2"].assigned.active == frozenset()
    app.join("m3", "p2", STATELESS)
    target = {m: sorted(p for _, p in t.active) for m, t in d.group().target.items()}
    # m1 keeps 0 and 1 (the active quota); 2 and 3 were held by m1, now full, so each goes to
    # the least loaded process, ties by process id: p2 (m3) first. Had the assignor started
    # from the last target, m2 would have kept 2 and m3 got 3.
    assert target == {"m1": [0, 1], "m2": [3], "m3": [2]}
