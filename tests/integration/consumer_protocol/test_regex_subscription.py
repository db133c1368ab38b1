"""Broker-side regex subscriptions (KIP-848 v1): librdkafka sends a `^...` subscription to
the coordinator, which resolves it with RE2 full-match semantics against the upstream's
topics; a matching topic created later starts a new group epoch and is assigned."""
from __future__ import annotations

from support.admin import create_topic
from support.fixtures import per_test_kcoord
from support.kcoord import FAST
from support.produce import produce_records
from support.rdkafka import RdkafkaConsumer
from support.wait import wait_until

# A new matching topic is picked up by the group's next regex refresh, at most every
# consumer_regex_batch_refresh_min_interval_ms (Kafka's
# group.consumer.regex.batch.refresh.min.interval.ms, 10 s by default): the test asserts
# that the topic gets assigned, not that interval, so the gateway here refreshes every 1 s.
REGEX_CONFIG = (*FAST, "consumer_regex_batch_refresh_min_interval_ms=1000")


kcoord = per_test_kcoord(REGEX_CONFIG, name="kcoord")


def test_regex_subscription_picks_up_new_matching_topics(kcoord, names, drivers):
    prefix = names.topic("rx")
    first, later, other = f"{prefix}-a", f"{prefix}-b", f"x{prefix}-c"
    for t in (first, other):
        create_topic(kcoord.bootstrap, t, 2)
    consumer = drivers.add(RdkafkaConsumer(kcoord.bootstrap, [f"^{prefix}-.*"], names.group(),
                                           group_protocol="consumer")).start()
    wait_until(lambda: {t for t, _ in consumer.assignment()} == {first}, 30,
               message=lambda: f"assignment {consumer.assignment()}")
    # Full match: "x<prefix>-c" does not match "<prefix>-.*" (RE2/J semantics, not a search).
    create_topic(kcoord.bootstrap, later, 3)
    wait_until(lambda: {t for t, _ in consumer.assignment()} == {first, later}, 45,
               message=lambda: f"assignment {consumer.assignment()}")
    produced = produce_records(kcoord.bootstrap, later, 20)
    wait_until(lambda: {(r.topic, r.offset, r.partition) for r in consumer.consumed() if r.topic == later}
               >= {(later, p.offset, p.partition) for p in produced}, 30, message="records of the new topic")
    assert all(r.topic != other for r in consumer.consumed())
