"""A consumer group's target assignment and the metadata image it was computed from.

In a cluster every kcoord process refreshes its own image of the upstream's topics
(`metadata.refresh.interval.ms`, 1 s), so a shard that moves may load in a process whose
image is older than the one that computed the group's metadata hash: a topic created a
moment before is missing there. A target computed from that image gives the topic's
partitions to nobody, while the group's hash still describes the topic; once the image
catches up, the hash matches again and nothing would ever compute a target with the
topic (Kafka's brokers share one KRaft image, so Kafka never meets this).
"""
from __future__ import annotations

from coordinator.config import CoordinatorConfig
from coordinator.group.image import MetadataImage

from .context import ShardContext, ok, topic

FOO = topic("foo", 6)


def _moved_with_an_older_image(c: ShardContext) -> None:
    """The shard loads in another process whose image does not list `foo` yet."""
    stale = MetadataImage.of((), version=c.shard.image.version)
    c.shard.image = stale
    c.shard = c.reload()
    c.loaded()


def _reconcile(c: ShardContext, members: dict[str, int], rounds: int = 6) -> dict[str, set[int]]:
    """Heartbeat every member `rounds` times, each reporting what it was last given (as a
    KIP-848 client acknowledges its assignment); returns what each member owns."""
    owned: dict[str, set[int]] = {m: set() for m in members}
    for _ in range(rounds):
        for m, epoch in members.items():
            r = c.heartbeat("g", m, epoch, owned={"foo": owned[m]})
            ok(r)
            members[m] = r.member_epoch
            if r.assignment is not None:
                owned[m] = c.assigned(r).get("foo", set())
        c.advance(c.config.consumer_assignment_interval_ms)
    return owned


def test_a_target_computed_from_an_image_without_the_topic_is_computed_again_once_it_has_it():
    c = ShardContext(FOO, config=CoordinatorConfig(consumer_assignment_interval_ms=100))
    r1 = c.heartbeat("g", "m1", 0, topics=["foo"])
    assert c.assigned(r1) == {"foo": set(range(6))}
    # Two more join within the assignment interval: their target waits for its timer.
    for m in ("m2", "m3"):
        ok(c.heartbeat("g", m, 0, topics=["foo"]))
    g = c.group("g")
    assert g.assignment_epoch < g.group_epoch

    _moved_with_an_older_image(c)
    c.advance(100)                   # the assignment timer fires in the new process
    c.update_image(FOO)              # its next refresh lists the topic

    owned = _reconcile(c, {m: c.member("g", m).member_epoch for m in ("m1", "m2", "m3")})
    assert set().union(*owned.values()) == set(range(6)), owned
    assert sum(len(ps) for ps in owned.values()) == 6, owned


def test_a_target_computed_on_a_heartbeat_from_an_older_image_is_computed_again_once_it_has_it():
    c = ShardContext(FOO, config=CoordinatorConfig(consumer_assignment_interval_ms=0))
    r1 = c.heartbeat("g", "m1", 0, topics=["foo"])
    assert c.assigned(r1) == {"foo": set(range(6))}

    _moved_with_an_older_image(c)
    ok(c.heartbeat("g", "m2", 0, topics=["foo"]))      # joins while the image lacks the topic
    c.update_image(FOO)

    owned = _reconcile(c, {"m1": r1.member_epoch, "m2": c.member("g", "m2").member_epoch})
    assert set().union(*owned.values()) == set(range(6)), owned
    assert sum(len(ps) for ps in owned.values()) == 6, owned


def test_a_client_mode_group_whose_timer_meets_an_older_image_asks_again_once_it_catches_up():
    """In client mode a member computes the target from a snapshot of the shard's image: the
    timer first moves the group to the image's hash in a new epoch, then asks, so the
    catch-up starts another epoch and another ask."""
    from coordinator.protocol.private_apis import COMPUTE_ASSIGNMENT

    from .test_client_assign import CsaContext

    c = CsaContext(FOO, config=CoordinatorConfig(consumer_assignment_interval_ms=100))
    for m in ("m1", "m2", "m3"):
        assert c.csa("g", m, 0).error_code in (0, COMPUTE_ASSIGNMENT)
    g = c.group("g")
    assert g.assignment_epoch < g.group_epoch and g.client_assignor_index.listed
    fresh_hash, epoch = g.metadata_hash, g.group_epoch

    _moved_with_an_older_image(c)
    c.advance(100)                   # the timer: the epoch moves to the older image's hash
    g = c.group("g")
    assert g.group_epoch == epoch + 1 and g.metadata_hash != fresh_hash
    c.update_image(FOO)
    assert c.csa("g", "m1", c.member("g", "m1").member_epoch).error_code in (0, COMPUTE_ASSIGNMENT)
    g = c.group("g")
    assert g.group_epoch == epoch + 2 and g.metadata_hash == fresh_hash


def test_a_timer_whose_image_matches_the_hash_keeps_the_epoch():
    c = ShardContext(FOO, config=CoordinatorConfig(consumer_assignment_interval_ms=100))
    ok(c.heartbeat("g", "m1", 0, topics=["foo"]))
    ok(c.heartbeat("g", "m2", 0, topics=["foo"]))
    epoch = c.group("g").group_epoch
    c.advance(100)
    assert c.group("g").group_epoch == epoch == c.group("g").assignment_epoch
