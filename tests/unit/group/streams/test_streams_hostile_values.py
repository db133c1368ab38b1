"""Absurd values in StreamsGroupHeartbeat, on the pure core (driver.py) and through the service
with a fake upstream link (test_service.py's): internal topics asking for impossible partition
counts and replication factors are refused with Kafka's controller messages and never sent
upstream; huge strings, thousands of client tags and tasks that do not exist are held (or
ignored) within the request's own size; epochs and timeouts at their extremes get Kafka's
answers (GroupMetadataManager's `throwIfStreamsGroupHeartbeatRequestIsInvalid` and
`throwIfStreamsGroupMemberEpochIsInvalid`, InternalTopicManager's `toCreatableTopic`)."""
from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from coordinator.protocol.codec import encode_body

from .driver import REQ, Driver, beat, image, join, subtopology, topic_info, topology
from .test_service import CLIENT, Link, background_done, service, statuses, with_link

I32_MAX, I32_MIN = 2**31 - 1, -(2**31)
TOP = topology(subtopology("0", sources=["input"], changelogs=["app-store-changelog"]))
READY = image(input=6, **{"app-store-changelog": 6})
ALL = {("0", p) for p in range(6)}
NONE_HELD = (set(), set(), set())
INVALID_RF = "Replication factor must be larger than 0, or -1 to use the default value."
TOO_MANY = "Excessively large number of partitions per request."


def _fast() -> Driver:
    return Driver(READY, streams_initial_rebalance_delay_ms=0, streams_assignment_interval_ms=0)


def _written(d: Driver, since: int = 0) -> int:
    """Bytes of the records the shard wrote (keys and values as Kafka's bytes)."""
    return sum(len(k) + len(v or b"") for k, v in (e for e in d.log[since:] if isinstance(e, tuple)))


def _repartitioned(partitions: int = 0, replication_factor: int = 0):
    return topology(subtopology("0", sources=["input"], sinks=["app-repartition"]),
                    subtopology("1", repartition=[REQ.TopicInfo(name="app-repartition", partitions=partitions,
                                                                replication_factor=replication_factor,
                                                                topic_configs=())]))


def _created(top, **images):
    """Join with ``top`` through the service: (what the fake link was sent, the statuses of the
    heartbeat after the background creation ran)."""
    async def main():
        svc = await service(**images)
        link = with_link(svc)
        first = await svc.handle(88, 1, join("m1", "p1", top), CLIENT)
        assert first.error_code == ErrorCode.none, first.error_message
        await background_done()
        again = await svc.handle(88, 1, beat("m1", first.member_epoch), CLIENT)
        assert again.error_code == ErrorCode.none, again.error_message
        return [(t.name, t.num_partitions, t.replication_factor) for r in link.sent for t in r.topics], \
            statuses(again)
    return asyncio.run(main())


@pytest.mark.parametrize("partitions", [I32_MAX, 10_001])
def test_a_repartition_topic_asking_for_more_than_the_controller_takes_is_refused_not_sent(partitions):
    sent, told = _created(_repartitioned(partitions), input=4)
    assert sent == []
    assert told[3] == f"Internal topics are missing: app-repartition; Creation failed: app-repartition ({TOO_MANY})."


def test_internal_topics_over_10000_partitions_together_are_refused_together():
    top = topology(subtopology("0", sources=["input"], sinks=["a-repartition", "b-repartition"]),
                   subtopology("1", repartition=[topic_info("a-repartition", 6_000)]),
                   subtopology("2", repartition=[topic_info("b-repartition", 5_000)]))
    sent, told = _created(top, input=4)
    assert sent == []
    assert told[3].endswith(f"; Creation failed: a-repartition ({TOO_MANY}), b-repartition ({TOO_MANY}).")


@pytest.mark.parametrize("partitions", [0, -1, -2, I32_MIN])
def test_a_repartition_topic_without_a_positive_count_takes_its_writers_count(partitions):
    """kcoord decides a count for every count below 1 (Kafka leaves only 0 undecided: see the
    report of this campaign); what goes upstream is within the controller's bounds."""
    sent, _ = _created(_repartitioned(partitions), input=4)
    assert sent == [("app-repartition", 4, -1)]


@pytest.mark.parametrize(("factor", "sent_as"), [(0, -1), (-1, -1), (3, 3), (32767, 32767)])
def test_a_replication_factor_is_sent_as_kafka_sends_it(factor, sent_as):
    """0 is unset (the cluster's default); any other factor goes as given and the upstream's
    controller judges it against its brokers (32767: "Unable to replicate ...")."""
    sent, _ = _created(_repartitioned(replication_factor=factor), input=4)
    assert sent == [("app-repartition", 4, sent_as)]


@pytest.mark.parametrize("factor", [-2, I32_MIN >> 16])
def test_a_replication_factor_below_minus_one_gets_the_controllers_refusal_and_is_not_sent(factor):
    sent, told = _created(_repartitioned(replication_factor=factor), input=4)
    assert sent == []
    assert told[3] == f"Internal topics are missing: app-repartition; Creation failed: app-repartition ({INVALID_RF})."


def test_thousands_of_internal_topics_go_in_one_request_and_are_refused_together():
    """5,000 changelogs of 4 partitions: Kafka asks for every missing internal topic in one
    CreateTopics (AutoTopicCreationManager.createStreamsInternalTopics), which its controller
    refuses whole. Sent 1,000 at a time, they passed the bound and all 20,000 partitions were
    created, a few heartbeats apart."""
    top = topology(*(subtopology(f"s{i}", sources=["input"], changelogs=[f"app-{i}-changelog"]) for i in range(5_000)))
    sent, told = _created(top, input=4)
    assert sent == []
    assert told[3].count(f"-changelog ({TOO_MANY})") == 5_000


def test_a_failed_creation_is_not_asked_again_until_it_is_forgotten():
    """Kafka's back-off: a topic in the creation error cache is not sent again before the
    error expires (twice the heartbeat interval)."""
    async def main():
        now = [100.0]
        svc = await service(input=4)
        link = with_link(svc, Link(ErrorCode.policy_violation, "no"), lambda: now[0])
        resp = await svc.handle(88, 1, join("m1", "p1", _repartitioned()), CLIENT)
        await background_done()
        for _ in range(3):
            resp = await svc.handle(88, 1, beat("m1", resp.member_epoch), CLIENT)
            await background_done()
        assert len(link.sent) == 1 and "Creation failed: app-repartition (no)." in statuses(resp)[3]
        now[0] += 10.001
        resp = await svc.handle(88, 1, beat("m1", resp.member_epoch), CLIENT)
        await background_done()
        assert len(link.sent) == 2
    asyncio.run(main())


def test_huge_strings_and_thousands_of_client_tags_are_kept_within_the_requests_size():
    d = _fast()
    tags = tuple(REQ.KeyValue(key=f"k{i}", value=f"v{i}") for i in range(5_000))
    req = join("m1", "p" * 32_767, TOP, user_endpoint=REQ.Endpoint(host="h" * 32_767, port=65_535),
               rack_id="r" * 32_767, instance_id="i" * 32_767)
    req = dataclasses.replace(req, client_tags=tags)
    a = d.hb(req)
    assert a.error_code == ErrorCode.none and a.tasks() == ALL
    assert _written(d) <= 2 * len(encode_body(req))
    other = d.hb(join("m2", "p2", TOP, user_endpoint=REQ.Endpoint(host="x", port=0)))
    assert other.error_code == ErrorCode.none
    shown = {e.user_endpoint.host for e in other.partitions_by_user_endpoint or ()}
    assert shown <= {"h" * 32_767, "x"}
    assert len(encode_body(other.raw)) <= 2 * len(encode_body(req))


def _tasks(pairs):
    """Each (subtopology, partition) listed three times."""
    return tuple(REQ.TaskIds(subtopology_id=s, partitions=(p, p, p)) for s, p in sorted(pairs))


GARBAGE = {("nope", -1), ("nope", I32_MAX), ("0", -5), ("0", I32_MAX), ("0", 99), ("", 0)}


def test_tasks_that_do_not_exist_repeated_or_negative_change_nothing_at_the_members_epoch():
    d = _fast()
    a = d.hb(join("m1", "p1", TOP))
    before, written = d.group().members["m1"].assigned, len(d.log)
    lying = dataclasses.replace(beat("m1", a.member_epoch, NONE_HELD), active_tasks=_tasks(GARBAGE),
                                standby_tasks=_tasks(GARBAGE), warmup_tasks=_tasks(GARBAGE))
    b = d.hb(lying)
    assert (b.error_code, b.member_epoch) == (ErrorCode.none, a.member_epoch)
    assert d.group().members["m1"].assigned == before and len(d.log) == written
    assert b.tasks() == ALL            # told its tasks again: what it reported differs


def test_tasks_that_do_not_exist_at_the_previous_epoch_fence_the_member():
    d = _fast()
    a = d.hb(join("m1", "p1", TOP))
    lying = dataclasses.replace(beat("m1", a.member_epoch - 1, NONE_HELD), active_tasks=_tasks(GARBAGE),
                                standby_tasks=_tasks(GARBAGE), warmup_tasks=_tasks(GARBAGE))
    b = d.hb(lying)
    assert b.error_code == ErrorCode.fenced_member_epoch
    assert f"smaller member epoch ({a.member_epoch - 1})" in b.error_message


@pytest.mark.parametrize(("epoch", "code", "says"), [
    (I32_MAX, ErrorCode.fenced_member_epoch, f"greater member epoch ({I32_MAX})"),
    (I32_MIN, ErrorCode.invalid_request, f"MemberEpoch is {I32_MIN}, but must be greater than or equal to -2."),
])
def test_a_member_epoch_at_the_extremes_gets_kafkas_answer(epoch, code, says):
    d = _fast()
    d.hb(join("m1", "p1", TOP))
    written = len(d.log)
    b = d.hb(beat("m1", epoch, NONE_HELD))
    assert b.error_code == code and says in b.error_message
    assert len(d.log) == written
    unknown = d.hb(beat("stranger", I32_MAX, NONE_HELD))
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.unknown_member_id,
                                                           "Member stranger is not a member of group app.")


@pytest.mark.parametrize("ms", [0, -2, I32_MIN, I32_MAX])
def test_a_rebalance_timeout_at_the_extremes_is_taken_and_the_member_still_expires(ms):
    """Kafka refuses only -1 on a join ("RebalanceTimeoutMs must be provided in first
    request."); the session timer, not the rebalance timeout, ends a silent member."""
    d = _fast()
    a = d.hb(dataclasses.replace(join("m1", "p1", TOP), rebalance_timeout=timedelta(milliseconds=ms)))
    assert a.error_code == ErrorCode.none and a.tasks() == ALL
    d.advance(45_001)                   # Kafka's streams session timeout
    assert d.group().members == {}
