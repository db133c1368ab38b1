"""The service's authorization hook (coordinator/authz.py): the group-level operation each
API needs is asked for; a refused single-group request gets the API's error response, a
multi-group one is answered per group, and ListGroups lists only what the client may see."""
from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from coordinator.authz import Action
from coordinator.config import CoordinatorConfig
from coordinator.group.image import MetadataImage
from coordinator.group.kio_util import schema
from coordinator.service import GroupCoordinatorService

from ..group.context import topic as topic_image
from ..runtime.fakes import FakeStateTopic
from ..runtime.test_shard_failures import CLIENT, commit_errors, committed

PARTITIONS = 2


class DenyGroups:
    """Refuses every action on the groups in ``denied`` (topics are all allowed: the topic
    rules have their own tests, tests/unit/security/test_authz_service_topics.py); records
    what was asked."""

    def __init__(self, *denied: str, cluster_describe: bool = False) -> None:
        self.denied = set(denied)
        self.cluster_describe = cluster_describe
        self.asked: list[Action] = []

    def authorize(self, client, actions):
        self.asked.extend(actions)
        return [(a.resource_type == "CLUSTER" and self.cluster_describe)
                or (a.resource_type == "GROUP" and a.name not in self.denied)
                or a.resource_type == "TOPIC" for a in actions]


async def service_with(authorizer) -> GroupCoordinatorService:
    topic = FakeStateTopic(PARTITIONS)
    service = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=PARTITIONS), topic,  # type: ignore[arg-type]
                                      authorizer=authorizer)
    service.on_metadata_update(MetadataImage.of([topic_image("t", 4)]))
    await service.start()
    return service


def commit_req(group: str):
    mod = schema("offset_commit", 9, "request")
    part = mod.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                            committed_metadata="")
    return mod.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                   group_instance_id=None,
                                   topics=(mod.OffsetCommitRequestTopic(name="t", partitions=(part,)),))


def test_a_refused_single_group_request_gets_its_error_response_and_writes_nothing():
    async def main():
        authz = DenyGroups("secret")
        service = await service_with(authz)
        resp = await service.handle(8, 9, commit_req("secret"), CLIENT)
        assert commit_errors(resp) == {ErrorCode.group_authorization_failed}
        assert Action("READ", "GROUP", "secret") in authz.asked
        assert all(not log for log in service.state_topic.logs.values()), "a refused commit wrote records"
        assert commit_errors(await service.handle(8, 9, commit_req("open"), CLIENT)) == {ErrorCode.none}

        hb = schema("heartbeat", 4, "request").HeartbeatRequest(group_id="secret", generation_id=1, member_id="m",
                                                               group_instance_id=None)
        assert (await service.handle(12, 4, hb, CLIENT)).error_code == ErrorCode.group_authorization_failed
    asyncio.run(main())


def test_multi_group_requests_are_answered_per_group_in_request_order():
    async def main():
        authz = DenyGroups("secret")
        service = await service_with(authz)
        await service.handle(8, 9, commit_req("open"), CLIENT)
        mod = schema("offset_fetch", 8, "request")
        req = mod.OffsetFetchRequest(groups=tuple(mod.OffsetFetchRequestGroup(group_id=g, topics=None)
                                                  for g in ("secret", "open")), require_stable=False)
        resp = await service.handle(9, 8, req, CLIENT)
        assert [(g.group_id, g.error_code) for g in resp.groups] == [
            ("secret", ErrorCode.group_authorization_failed), ("open", ErrorCode.none)]
        assert Action("DESCRIBE", "GROUP", "secret") in authz.asked

        dg = schema("describe_groups", 5, "request").DescribeGroupsRequest(
            groups=("open", "secret"), include_authorized_operations=False)
        described = await service.handle(15, 5, dg, CLIENT)
        assert [(g.group_id, g.error_code) for g in described.groups] == [
            ("open", ErrorCode.none), ("secret", ErrorCode.group_authorization_failed)]

        dl = schema("delete_groups", 2, "request").DeleteGroupsRequest(groups_names=("secret", "open"))
        deleted = await service.handle(42, 2, dl, CLIENT)
        assert [(r.group_id, r.error_code) for r in deleted.results] == [
            ("secret", ErrorCode.group_authorization_failed), ("open", ErrorCode.none)]
        assert Action("DELETE", "GROUP", "open") in authz.asked
    asyncio.run(main())


def test_list_groups_lists_only_describable_groups_unless_the_cluster_is_describable():
    async def main():
        for cluster, expected in ((False, ["open"]), (True, ["open", "secret"])):
            authz = DenyGroups(cluster_describe=cluster)
            service = await service_with(authz)
            await service.handle(8, 9, commit_req("open"), CLIENT)
            await service.handle(8, 9, commit_req("secret"), CLIENT)
            authz.denied = {"secret"}
            req = schema("list_groups", 4, "request").ListGroupsRequest(states_filter=())
            listed = await service.handle(16, 4, req, CLIENT)
            assert sorted(g.group_id for g in listed.groups) == expected, (cluster, listed.groups)
    asyncio.run(main())


def test_without_an_authorizer_nothing_is_asked_and_everything_is_served():
    async def main():
        topic = FakeStateTopic(PARTITIONS)
        service = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=PARTITIONS), topic)  # type: ignore[arg-type]
        service.on_metadata_update(MetadataImage.of([topic_image("t", 4)]))
        await service.start()
        assert commit_errors(await service.handle(8, 9, commit_req("any"), CLIENT)) == {ErrorCode.none}
        mod = schema("offset_fetch", 7, "request")
        fetched = await service.handle(9, 7, mod.OffsetFetchRequest(group_id="any", topics=None, require_stable=False),
                                       CLIENT)
        assert committed(fetched) == {("t", 0): 5}
    asyncio.run(main())
