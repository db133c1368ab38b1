"""The streams group APIs through the service (coordinator/service/streams_apis.py): the rows
advertised and routed, the heartbeat and describe run on the group's shard, Kafka 4.4's
KafkaApis checks (internal and invalid topic names, TOPIC DESCRIBE, Group READ/DESCRIBE),
internal topics created only with the member's CREATE rights, failures cached and reported,
API 93 without a plugin, and the group's settings read from its per-group configuration."""
from __future__ import annotations

import asyncio
import dataclasses
import random
from datetime import timedelta

from kio.schema.errors import ErrorCode

from coordinator.authz import Action
from coordinator.config import CoordinatorConfig
from coordinator.gateway.routes import GROUP, build_routes, route_key
from coordinator.group.kio_util import build
from coordinator.group.streams.topic_names import CreatableTopic
from coordinator.protocol import apis
from coordinator.protocol.api_versions import advertised_versions
from coordinator.protocol.service import ClientInfo
from coordinator.service import GroupCoordinatorService
from coordinator.service.streams_apis import NO_PLUGIN, creator_of
from coordinator.service.streams_topics import InternalTopicCreator, link_opener
from fuzz.samples import sample
from fuzz.targets import SERVED, TARGETS

from ...runtime.fakes import FakeStateTopic
from .driver import beat, image, join, schema, subtopology, topic_info, topology

PARTITIONS = 2
CLIENT = ClientInfo(client_id="app-1", host="127.0.0.1", port=1, listener="test")
DESCRIBE_REQ = schema("streams_group_describe", 1, "request")
UPDATE_REQ = schema("streams_group_topology_description_update", 0, "request")


class Rights:
    """Allows everything but the (operation, resource type, name) triples in ``refused``."""

    def __init__(self, *refused: tuple[str, str, str]) -> None:
        self.refused = set(refused)
        self.asked: list[Action] = []

    def authorize(self, client, actions):
        self.asked.extend(actions)
        return [(a.operation, a.resource_type, a.name) not in self.refused for a in actions]


class Link:
    """A fake upstream link: records the CreateTopics it gets, answers each topic ``error``."""

    closed = False

    def __init__(self, error: ErrorCode = ErrorCode.none, message: str | None = None) -> None:
        self.error, self.message = error, message
        self.sent: list = []

    async def request(self, request, timeout):
        self.sent.append(request)
        mod = schema("create_topics", int(request.__version__))
        return build(mod.CreateTopicsResponse, throttle_time=timedelta(0), topics=tuple(build(
            mod.CreatableTopicResult, name=t.name, topic_id=None, error_code=self.error, error_message=self.message,
            topic_config_error_code=0, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
            configs=())
            for t in request.topics))

    def close(self):
        pass


async def service(authorizer=None, **images) -> GroupCoordinatorService:
    extra = {"authorizer": authorizer} if authorizer is not None else {}
    svc = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=PARTITIONS), FakeStateTopic(PARTITIONS),  # type: ignore[arg-type]
                                  **extra)
    svc.on_metadata_update(image(**images))
    await svc.start()
    return svc


def with_link(svc, link: Link | None = None, clock=None) -> Link:
    """The service's internal topics created through ``link`` (a new one by default)."""
    link = link or Link()

    async def open_link():
        return link
    creator = InternalTopicCreator(open_link, lambda: svc.image, *(() if clock is None else (clock,)))
    from coordinator.service import streams_apis
    streams_apis._creators[svc] = creator
    return link


async def background_done() -> None:
    """Let the background CreateTopics run (the fake link answers at once)."""
    for _ in range(3):
        await asyncio.sleep(0)


COUNT = topology(subtopology("0", sources=["input"], sinks=["app-repartition"]),
                 subtopology("1", repartition=["app-repartition"], changelogs=["app-store-changelog"]))


def statuses(resp) -> dict[int, str]:
    return {s.status_code: s.status_detail for s in resp.status or ()}


def test_the_rows_are_advertised_routed_and_in_the_fuzzers_table():
    async def main():
        svc = await service(input=4)
        listed = advertised_versions({}, svc.api_versions)
        assert {k: listed[k] for k in (88, 89, 93)} == {88: (0, 1), 89: (0, 1), 93: (0, 0)}
        routes = build_routes(listed, svc.table)
        assert all(routes[route_key(k, v)].kind == GROUP for k, v in ((88, 0), (88, 1), (89, 1), (93, 0)))
        assert {88, 89, 93} <= apis.GROUP_APIS      # never forwarded, served or not
    asyncio.run(main())
    assert {t.api_key for t in TARGETS if t.handling == SERVED} >= {88, 89, 93}


def test_a_join_is_served_by_the_shard_and_the_describe_shows_it():
    async def main():
        svc = await service(input=4, **{"app-repartition": 4, "app-store-changelog": 4})
        resp = await svc.handle(88, 1, join("m1", "p1", COUNT), CLIENT)
        assert resp.error_code == ErrorCode.none and resp.member_id == "m1" and resp.member_epoch > 0
        # kcoord's adaptive interval: the target waits out the 3 s initial delay, so the member
        # is told the stable interval (test_heartbeat_interval.py has the rule)
        assert resp.heartbeat_interval == timedelta(milliseconds=500)
        described = await svc.handle(89, 1, DESCRIBE_REQ.StreamsGroupDescribeRequest(
            group_ids=("app", "nope"), include_authorized_operations=False, include_topology_description=True), CLIENT)
        app, nope = described.groups
        assert (app.group_id, app.error_code) == ("app", ErrorCode.none)
        assert [m.member_id for m in app.members] == ["m1"]
        assert app.assignor_name == "sticky" and app.topology_description_status == 1     # NOT_STORED
        assert nope.error_code == ErrorCode.group_id_not_found
    asyncio.run(main())


def test_kafka_internal_and_invalid_topic_names_are_refused_before_the_coordinator():
    async def main():
        svc = await service(input=4)
        bad = topology(subtopology("0", sources=["input", "__consumer_offsets"], sinks=["__transaction_state"]))
        resp = await svc.handle(88, 0, join("m1", "p1", bad), CLIENT)
        assert resp.error_code == ErrorCode.streams_invalid_topology
        assert resp.error_message == ("Use of Kafka internal topics __consumer_offsets,__transaction_state in a "
                                      "Kafka Streams topology is prohibited.")
        state = topology(subtopology("0", sources=[svc.config.state_topic]))
        resp = await svc.handle(88, 0, join("m1", "p1", state), CLIENT)
        assert resp.error_code == ErrorCode.streams_invalid_topology
        invalid = topology(subtopology("0", sources=["a b", "ok"], changelogs=["c/d"]))
        resp = await svc.handle(88, 1, join("m1", "p1", invalid), CLIENT)
        assert (resp.error_code, resp.error_message) == (ErrorCode.streams_invalid_topology,
                                                         "Topic names a b,c/d are not valid topic names.")
        assert "app" not in svc.runtime_for("app").shard.groups
    asyncio.run(main())


def test_acls_group_read_topic_describe_and_a_filtered_describe():
    async def main():
        rights = Rights(("DESCRIBE", "TOPIC", "input"), ("READ", "GROUP", "closed"), ("DESCRIBE", "GROUP", "closed"))
        svc = await service(rights, input=4, other=2)
        resp = await svc.handle(88, 1, join("m1", "p1", COUNT), CLIENT)
        assert (resp.error_code, resp.error_message) == (ErrorCode.topic_authorization_failed, None)
        resp = await svc.handle(88, 1, join("m1", "p1", COUNT, group="closed"), CLIENT)
        assert resp.error_code == ErrorCode.group_authorization_failed
        both = topology(subtopology("0", sources=["other"], changelogs=["app-store-changelog"]))
        with_link(svc, Link())
        assert (await svc.handle(88, 1, join("m1", "p1", both), CLIENT)).error_code == ErrorCode.none
        rights.refused.add(("DESCRIBE", "TOPIC", "other"))
        described = await svc.handle(89, 1, DESCRIBE_REQ.StreamsGroupDescribeRequest(
            group_ids=("app", "closed"), include_authorized_operations=True), CLIENT)
        closed, app = described.groups           # Kafka's order: refused groups first
        assert (closed.group_id, closed.error_code) == ("closed", ErrorCode.group_authorization_failed)
        sub = app.topology.subtopologies[0]
        assert sub.source_topics == () and [t.name for t in sub.state_changelog_topics] == ["app-store-changelog"]
        assert app.authorized_operations > 0
        update = dataclasses.replace(sample(UPDATE_REQ.StreamsGroupTopologyDescriptionUpdateRequest,
                                            random.Random(1)), group_id="closed")
        assert (await svc.handle(93, 0, update, CLIENT)).error_code == ErrorCode.group_authorization_failed
    asyncio.run(main())


def test_api_93_answers_unsupported_version_without_a_plugin():
    async def main():
        svc = await service(input=4)
        req = sample(UPDATE_REQ.StreamsGroupTopologyDescriptionUpdateRequest, random.Random(2))
        resp = await svc.handle(93, 0, req, CLIENT)
        assert (resp.error_code, resp.error_message) == (ErrorCode.unsupported_version, NO_PLUGIN)
    asyncio.run(main())


def test_internal_topics_are_created_with_the_members_create_rights_and_failures_reported():
    async def main():
        now = [100.0]
        rights = Rights(("CREATE", "CLUSTER", "kafka-cluster"), ("CREATE", "TOPIC", "app-store-changelog"))
        svc = await service(rights, input=4)
        link = Link()
        with_link(svc, link, lambda: now[0])
        resp = await svc.handle(88, 1, join("m1", "p1", COUNT), CLIENT)
        assert statuses(resp)[3] == ("Internal topics are missing: app-repartition, app-store-changelog; "
                                     "Unauthorized to CREATE on topics app-store-changelog.")
        assert link.sent == []                # nothing created the member could not create
        rights.refused = {("CREATE", "CLUSTER", "kafka-cluster")}     # CREATE on both topics now
        link.error, link.message = ErrorCode.policy_violation, "no, says the policy"
        resp = await svc.handle(88, 1, beat("m1", resp.member_epoch), CLIENT)
        await background_done()
        [sent] = link.sent
        assert sorted((t.name, t.num_partitions, t.replication_factor) for t in sent.topics) == [
            ("app-repartition", 4, -1), ("app-store-changelog", 4, -1)]
        resp = await svc.handle(88, 1, beat("m1", resp.member_epoch), CLIENT)
        assert statuses(resp)[3].endswith("; Creation failed: app-repartition (no, says the policy), "
                                          "app-store-changelog (no, says the policy).")
        now[0] += 10.001                      # twice the 5 s heartbeat interval: forgotten
        link.error = ErrorCode.none
        resp = await svc.handle(88, 1, beat("m1", resp.member_epoch), CLIENT)
        assert "Creation failed" not in statuses(resp)[3]
    asyncio.run(main())


def test_without_an_authorizer_the_topics_are_created_and_the_group_settings_are_read():
    async def main():
        svc = await service(input=4)
        link = with_link(svc)
        shard = svc.runtime_for("app").shard
        shard.group_configs.replace("app", {"streams.heartbeat.interval.ms": "7000",
                                            "streams.session.timeout.ms": "50000"})
        resp = await svc.handle(88, 1, join("m1", "p1", COUNT), CLIENT)
        assert resp.heartbeat_interval == timedelta(seconds=7)
        await background_done()
        assert [t.name for r in link.sent for t in r.topics] == ["app-repartition", "app-store-changelog"]
        assert isinstance(creator_of(svc), InternalTopicCreator)
    asyncio.run(main())


def test_a_creation_that_made_a_topic_asks_for_a_metadata_refresh_and_a_failed_one_does_not():
    """The group sees its new internal topics at the gateway's next refresh, asked for at once
    (cli.py wires the service's request_metadata_refresh to the metadata view's)."""
    async def main():
        refreshes: list[int] = []
        topics = [CreatableTopic("app-repartition", 4, -1, ()), CreatableTopic("app-store-changelog", 4, -1, ())]
        for error, expected in ((ErrorCode.topic_already_exists, 0), (ErrorCode.none, 1)):
            link = Link(error)

            async def open_link(link=link):
                return link
            creator = InternalTopicCreator(open_link, on_created=lambda: refreshes.append(1))
            creator.create(topics, 10_000)
            await background_done()
            assert len(link.sent) == 1 and len(refreshes) == expected, error
    asyncio.run(main())


def test_internal_topics_beyond_kafkas_controller_limits_are_refused_not_sent_upstream():
    async def main():
        svc = await service(input=4)
        link = with_link(svc)
        huge = topology(subtopology("0", sources=["input"], sinks=["app-repartition"]),
                        subtopology("1", repartition=[topic_info("app-repartition", 20_000)],
                                    changelogs=["app-store-changelog"]))
        resp = await svc.handle(88, 1, join("m1", "p1", huge), CLIENT)
        await background_done()
        resp = await svc.handle(88, 1, beat("m1", resp.member_epoch), CLIENT)
        assert link.sent == []
        assert statuses(resp)[3].endswith("; Creation failed: app-repartition (Excessively large number of "
                                          "partitions per request.), app-store-changelog (Excessively large "
                                          "number of partitions per request.).")
    asyncio.run(main())


def test_the_link_is_kcoords_own_from_its_state_log():
    opened = []

    class Links:
        bootstrap = [("b1", 9092)]

        async def open(self, addresses):
            opened.append(addresses)
            return "link"

    class Fenced:
        links = Links()

    class Plain:
        bootstrap, security = "h1:1,h2:2", None

    assert asyncio.run(link_opener(Fenced())()) == "link" and opened == [[("b1", 9092)]]
    assert link_opener(Plain()) is not None
    assert link_opener(FakeStateTopic(PARTITIONS)) is None       # not on a cluster: nothing to create with
