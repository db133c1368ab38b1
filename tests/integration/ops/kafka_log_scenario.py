"""A mixed group workload run straight against a real Apache Kafka broker, so that Kafka's own
group coordinator writes `__consumer_offsets` (issue 11 §5, "Kafka's own log, replayed").

Real clients only (librdkafka consumers through support.rdkafka, confluent-kafka's producer and
AdminClient, raw protocol for share and streams groups). What it leaves behind, by group:

    kip848-moves     consumer protocol; a member joins, a second one takes partitions away
                     (revocation), the first leaves: one live member owning everything
    kip848-regex     consumer protocol, subscribed by regular expression; one live static
                     member (group.instance.id) with a rack
    kip848-stuck     consumer protocol; a revocation in flight (a member that stopped polling
                     keeps partitions the new member's target assignment holds): Reconciling
    kip848-empty     consumer protocol; its only member commits and leaves: Empty, offsets kept
    classic-live     classic protocol (range); two live members, one of them static
    classic-upgrade  classic group joined by a consumer-protocol member: upgraded online to a
                     consumer group with a classic and a consumer member (both live)
    classic-downgrade  upgraded the same way, then the consumer member leaves: downgraded
                     back to a classic group with its classic member (live)
    txn-group        TxnOffsetCommit: one committed transaction, one aborted one
    offset-deleted   offsets committed by an admin client, one topic's deleted (OffsetDelete)
    retention-group  OffsetCommit v2 with a retention time (OffsetCommitValue version 1)
    group-deleted, kip848-deleted   a classic and a consumer group deleted (DeleteGroups)
    share-g, streams-g   a share group and a streams group (records kcoord must skip)
"""
from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass, field

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition

from support.admin import admin_client, create_topic
from support.raw_client import call_with, request_types
from support.rdkafka import RdkafkaConsumer
from support.wait import wait_until

TOPICS = {"orders": 4, "payments": 2}
ALL_TPS = [(t, p) for t, n in TOPICS.items() for p in range(n)]
CLASSIC_SESSION_MS = 45_000     # as long as the consumer-protocol session: compare at leisure
SHARE_GROUP_HEARTBEAT, STREAMS_GROUP_HEARTBEAT, OFFSET_DELETE, OFFSET_COMMIT = 76, 88, 47, 8

# Broker settings of the scenario broker (besides the fixture's), so the log looks like a
# production one and the run stays short:
BROKER_OVERRIDES = {
    # heartbeats every second: KIP-848 revocations settle in seconds, not 5 s per round trip
    "group.consumer.heartbeat.interval.ms": "1000",
    # the coordinator's batches zstd-compressed (codec 4; default none), as some clusters do
    "offsets.topic.compression.codec": "4",
    # a new segment every 2 s of appends (default 7 days) and compaction as soon as anything is
    # dirty (default ratio 0.5): the log has several segments per partition, older ones
    # compacted by Kafka's log cleaner, as a long-running cluster's log has
    "log.roll.ms": "2000",
    "log.cleaner.min.cleanable.ratio": "0.01",
}

DELETED_GROUPS = ("group-deleted", "kip848-deleted")
IN_FLIGHT = ("kip848-stuck",)          # left Reconciling on purpose
OTHER_TYPES = {"share-g": "share", "streams-g": "streams"}


@dataclass
class Scenario:
    bootstrap: str
    live: list = field(default_factory=list)        # consumers still in their groups
    produced: int = 0                               # messages per partition so far
    share_streams_answers: dict = field(default_factory=dict)   # what the raw calls answered

    def produce(self, per_partition: int) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        for topic, n in TOPICS.items():
            for p in range(n):
                for i in range(per_partition):
                    producer.produce(topic, value=f"{topic}-{p}-{self.produced + i}", partition=p)
        assert producer.flush(30) == 0
        self.produced += per_partition

    def consumer(self, group: str, protocol: str, name: str, topics=tuple(TOPICS), **kw) -> RdkafkaConsumer:
        if protocol == "classic":
            kw.setdefault("session_timeout_ms", CLASSIC_SESSION_MS)
            kw.setdefault("assignment_strategy", "range")
        c = RdkafkaConsumer(self.bootstrap, list(topics), group, member=name,
                            group_protocol=protocol, **kw)
        self.live.append(c)
        return c.start()

    def close(self, c: RdkafkaConsumer) -> None:
        c.close(timeout=30)
        self.live.remove(c)

    def shutdown(self) -> None:
        for c in reversed(self.live):
            c.shutdown()
        self.live.clear()


def owned(consumers) -> dict[str, set]:
    """member -> partitions it holds now, from the drivers' assigned/revoked/lost events."""
    out = {}
    for c in consumers:
        held: set = set()
        for e in c.events():
            tps = {tuple(tp) for tp in e.get("partitions", ())}
            if e["event"] == "assigned":
                held = held | tps if c.incremental else tps
            elif e["event"] in ("revoked", "lost"):
                held = held - tps if c.incremental else set()
        out[c.member] = held
    return out


def settle(s: Scenario, group: str, consumers, timeout: float = 60.0, tps=tuple(ALL_TPS)) -> None:
    """Every partition owned by exactly one of `consumers` (each owning some), and the group's
    committed offsets at the end of every partition."""
    def shared_out():
        held = owned(consumers)
        parts = sorted(tp for h in held.values() for tp in h)
        return parts == sorted(tps) and all(held.values())

    wait_until(shared_out, timeout, 0.2, lambda: f"{group}: partitions owned {owned(consumers)}")
    wait_committed(s.bootstrap, group, {tp: s.produced for tp in tps}, timeout)


def committed(bootstrap: str, group: str) -> dict:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(t, p) for t, p in ALL_TPS], timeout=10)
    finally:
        c.close()
    return {(tp.topic, tp.partition): tp.offset for tp in tps if tp.offset >= 0}


def wait_committed(bootstrap: str, group: str, want: dict, timeout: float = 60.0) -> None:
    wait_until(lambda: committed(bootstrap, group) == want, timeout, 0.3,
               lambda: f"{group}: committed {committed(bootstrap, group)}, want {want}")


# ------------------------------------------------------------------ the steps
def kip848_moves(s: Scenario) -> None:
    group = "kip848-moves"
    a = s.consumer(group, "consumer", "moves-a")
    settle(s, group, [a])
    b = s.consumer(group, "consumer", "moves-b")
    settle(s, group, [a, b])                        # a revoked some partitions, b got them
    s.close(a)
    settle(s, group, [b])


def kip848_regex(s: Scenario) -> None:
    """A member subscribed by regular expression (KIP-848 server-side regex, record type 16)."""
    c = s.consumer("kip848-regex", "consumer", "regex-1", topics=("^ord.*",),
                   group_instance_id="regex-static", extra_config={"client.rack": "rack-a"})
    settle(s, "kip848-regex", [c], tps=tuple(tp for tp in ALL_TPS if tp[0] == "orders"))


def kip848_stuck(s: Scenario, address: tuple[str, int]) -> None:
    """A revocation left in flight: the first member stops polling (librdkafka keeps
    heartbeating, but never runs the revoke callback), so when a second member joins the
    first stays in UNREVOKED_PARTITIONS and the group Reconciling, until its rebalance
    timeout (max.poll.interval.ms, 300 s) ends it."""
    from kafka_log_view import consumer_describe

    group = "kip848-stuck"
    x = s.consumer(group, "consumer", "stuck-x")
    settle(s, group, [x])
    x.stop_abruptly()
    s.consumer(group, "consumer", "stuck-y")

    def in_flight():
        _err, state, epoch, _aepoch, _a, members = consumer_describe(address, [group])[group]
        return state == "Reconciling" and len(members) == 2 and \
            any(m[8] != m[9] for m in members)
    wait_until(in_flight, 30, 0.2, lambda: f"{group} reconciling: {consumer_describe(address, [group])}")


def kip848_empty_and_deleted(s: Scenario) -> None:
    for group in ("kip848-empty", "kip848-deleted"):
        c = s.consumer(group, "consumer", f"{group}-1")
        settle(s, group, [c])
        s.close(c)


def classic_groups(s: Scenario) -> None:
    c1 = s.consumer("classic-live", "classic", "classic-1")
    c2 = s.consumer("classic-live", "classic", "classic-2", group_instance_id="classic-static")
    settle(s, "classic-live", [c1, c2])
    u1 = s.consumer("classic-upgrade", "classic", "upgrade-classic")
    settle(s, "classic-upgrade", [u1])
    u2 = s.consumer("classic-upgrade", "consumer", "upgrade-consumer")    # online upgrade
    settle(s, "classic-upgrade", [u1, u2])
    d1 = s.consumer("classic-downgrade", "classic", "downgrade-classic")
    settle(s, "classic-downgrade", [d1])
    d2 = s.consumer("classic-downgrade", "consumer", "downgrade-consumer")
    settle(s, "classic-downgrade", [d1, d2])
    s.close(d2)                                     # the last consumer member left: downgrade
    settle(s, "classic-downgrade", [d1])
    g = s.consumer("group-deleted", "classic", "deleted-1")
    settle(s, "group-deleted", [g])
    s.close(g)


def transactions(s: Scenario) -> None:
    """One committed and one aborted TxnOffsetCommit (sendOffsetsToTransaction)."""
    holder = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "txn-group",
                       "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": s.bootstrap, "transactional.id": "kcoord-replay-txn"})
    try:
        producer.init_transactions(30)
        meta = holder.consumer_group_metadata()
        producer.begin_transaction()
        producer.produce("orders", value=b"in-txn-1", partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition("orders", 0, 11), TopicPartition("orders", 1, 12)], meta, 30)
        producer.commit_transaction(30)
        producer.begin_transaction()
        producer.produce("orders", value=b"in-txn-2", partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition("orders", 0, 99), TopicPartition("payments", 0, 99)], meta, 30)
        producer.abort_transaction(30)
    finally:
        holder.close()
    wait_committed(s.bootstrap, "txn-group", {("orders", 0): 11, ("orders", 1): 12})


def admin_offsets_and_deletes(s: Scenario, address: tuple[str, int]) -> None:
    admin = admin_client(s.bootstrap)
    offsets = [TopicPartition(t, p, 7 if t == "orders" else 3, metadata=f"m{p}") for t, p in ALL_TPS]
    admin.alter_consumer_group_offsets(      # OffsetCommit, generation -1: a "simple" group
        [ConsumerGroupTopicPartitions("offset-deleted", offsets)])["offset-deleted"].result(30)
    # OffsetDelete: confluent-kafka's AdminClient lacks deleteConsumerGroupOffsets.
    od = request_types(OFFSET_DELETE, 0)
    payments = od.OffsetDeleteRequestTopic(name="payments", partitions=tuple(
        od.OffsetDeleteRequestPartition(partition_index=p) for p in range(TOPICS["payments"])))
    resp = call_with(address, OFFSET_DELETE, 0, group_id="offset-deleted", topics=(payments,))
    assert resp.error_code == 0 and all(p.error_code == 0 for t in resp.topics for p in t.partitions)
    wait_committed(s.bootstrap, "offset-deleted", {("orders", p): 7 for p in range(4)})
    for f in admin.delete_consumer_groups(list(DELETED_GROUPS), request_timeout=30).values():
        f.result(30)
    for group in DELETED_GROUPS:
        wait_committed(s.bootstrap, group, {})


def retention_commit(s: Scenario, address: tuple[str, int]) -> None:
    """OffsetCommit v2 with a retention time: Kafka writes OffsetCommitValue version 1 (with
    expireTimestamp), the only place 4.x still writes it."""
    oc = request_types(OFFSET_COMMIT, 2)
    topic = oc.OffsetCommitRequestTopic(name="payments", partitions=tuple(
        oc.OffsetCommitRequestPartition(partition_index=p, committed_offset=2 + p,
                                        committed_metadata="kept an hour")
        for p in range(TOPICS["payments"])))
    resp = call_with(address, OFFSET_COMMIT, 2, group_id="retention-group",
                     generation_id_or_member_epoch=-1, member_id="",
                     retention_time=_ms(3_600_000), topics=(topic,))
    assert all(p.error_code == 0 for t in resp.topics for p in t.partitions), resp


def share_and_streams(s: Scenario, address: tuple[str, int]) -> None:
    """A share member and a streams member join (records of types 10-15 and 17-23)."""
    share = call_with(address, SHARE_GROUP_HEARTBEAT, 1, group_id="share-g",
                      member_id=str(uuid.uuid4()), member_epoch=0, rack_id=None,
                      subscribed_topic_names=("orders",))
    st = request_types(STREAMS_GROUP_HEARTBEAT, 0)
    topology = st.Topology(epoch=0, subtopologies=(st.Subtopology(
        subtopology_id="0", source_topics=("payments",), source_topic_regex=(),
        state_changelog_topics=(), repartition_sink_topics=(), repartition_source_topics=(),
        copartition_groups=()),))
    streams = call_with(address, STREAMS_GROUP_HEARTBEAT, 0, group_id="streams-g",
                        member_id=str(uuid.uuid4()), member_epoch=0, endpoint_information_epoch=0,
                        instance_id=None, rack_id=None, rebalance_timeout=_ms(30_000),
                        topology=topology, active_tasks=(), standby_tasks=(), warmup_tasks=(),
                        process_id=str(uuid.uuid4()), user_endpoint=None, client_tags=(),
                        task_offsets=None, task_end_offsets=None, shutdown_application=False)
    s.share_streams_answers = {"share": (share.error_code, share.error_message),
                               "streams": (streams.error_code, streams.error_message)}
    assert share.error_code == 0 and streams.error_code == 0, s.share_streams_answers


def _ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def run(s: Scenario, address: tuple[str, int]) -> None:
    for topic, n in TOPICS.items():
        create_topic(s.bootstrap, topic, n, timeout=30)
    s.produce(5)
    kip848_moves(s)
    kip848_regex(s)
    kip848_stuck(s, address)
    kip848_empty_and_deleted(s)
    classic_groups(s)
    transactions(s)
    admin_offsets_and_deletes(s, address)
    retention_commit(s, address)
    share_and_streams(s, address)
