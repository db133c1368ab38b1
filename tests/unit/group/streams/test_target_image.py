"""A streams group's target and the metadata image it was computed from.

In a cluster every kcoord process refreshes its own image of the upstream's topics, so a
shard that moves may load in a process whose image is older than the one that computed the
group's metadata hash: partitions added to a source topic a moment before are missing there.
The paced target its assignment timer computes from that image hands out only the tasks
it knows; once the image catches up the hash matches the group's again, and no heartbeat
would compute another, so the new partitions' tasks would never run
(Kafka's brokers share one KRaft image, so Kafka never meets this). The timer stamps the
target with the image's hash in a new epoch, so the next heartbeat after the catch-up
starts another (coordinator/group/streams/timers.py)."""
from __future__ import annotations

from coordinator.group.streams.timers import on_loaded

from .driver import Driver, image, subtopology, topology
from .test_heartbeat import App

STATELESS = topology(subtopology("0", sources=["input"]))
ALL = {("0", p) for p in range(6)}


def test_a_target_computed_from_an_image_without_new_partitions_is_computed_again_once_it_has_them():
    d = Driver(image(input=6), streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=1_000)
    app = App(d)
    app.join("m1", "p1", STATELESS)
    app.settle(2)
    assert app.held["m1"][0] == ALL
    app.join("m2", "p2", STATELESS)           # its target waits for the assignment timer
    group = d.group()
    assert group.target_assignment_epoch < group.group_epoch

    d.shard.image = image(input=3)            # the shard loads in a process that has seen 3 of 6 partitions
    d.shard = d.reloaded()
    for timer in on_loaded(d.shard, d.now_ms):
        d.timers[timer.key] = (timer.deadline_ms, timer.payload)
    d.advance(1_000)                          # the paced timer fires there: a target of 3 tasks
    assert d.group().target_assignment_epoch == d.group().group_epoch
    d.shard.image = image(input=6)            # its next refresh lists the topic

    for _ in range(4):
        app.settle(2)
        d.advance(1_000)
    active = [app.held[m][0] for m in ("m1", "m2")]
    assert set().union(*active) == ALL, active
    assert sum(map(len, active)) == 6, active


def test_a_timer_whose_image_matches_the_hash_keeps_the_epoch():
    d = Driver(image(input=6), streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=100)
    app = App(d)
    app.join("m1", "p1", STATELESS)
    app.join("m2", "p2", STATELESS)
    epoch = d.group().group_epoch
    d.advance(100)
    assert d.group().group_epoch == epoch == d.group().target_assignment_epoch


def test_a_timer_that_starts_an_epoch_records_the_assignment_configs_its_target_used():
    """The timer's target is computed with the group's current settings, so the epoch it starts
    records their assignment configs: a standby count changed since the last heartbeat does not
    make the next heartbeat start another epoch for the same target."""
    d = Driver(image(input=6), streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=1_000)
    app = App(d)
    app.join("m1", "p1", STATELESS)
    app.settle(2)
    app.join("m2", "p2", STATELESS)           # its target waits for the assignment timer
    assert d.group().last_assignment_configs == (("num.standby.replicas", "0"),)
    d.shard.group_configs.replace("app", {"streams.num.standby.replicas": "1"})
    d.shard.image = image(input=3)            # the timer's image differs from the hash: it starts an epoch
    epoch = d.group().group_epoch
    d.advance(1_000)
    group = d.group()
    assert group.group_epoch == group.target_assignment_epoch == epoch + 1
    assert group.last_assignment_configs == (("num.standby.replicas", "1"),)
    app.settle(2)                             # heartbeats under the same configs and image: no new epoch
    assert d.group().group_epoch == epoch + 1
