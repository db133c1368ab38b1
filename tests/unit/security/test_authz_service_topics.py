"""The service's topic-level authorization (coordinator/service/topic_checks.py, the topic check each API's row names), with a real
AclAuthorizer over the in-memory state topic of tests/unit/service/test_authz.py: OffsetCommit
and OffsetDelete need Topic READ per topic, OffsetFetch Topic DESCRIBE (fetch-all drops silently,
named topics answer TOPIC_AUTHORIZATION_FAILED), ConsumerGroupHeartbeat DESCRIBE on
SubscribedTopicNames, ConsumerGroupDescribe fails a group with undescribable topics;
AuthorizedOperations; the audit log and the denial metric."""
from __future__ import annotations

import asyncio
from datetime import timedelta

import orjson
from kio.schema.errors import ErrorCode
from prometheus_client import REGISTRY

from coordinator.config import CoordinatorConfig
from coordinator.group.image import MetadataImage
from coordinator.group.kio_util import schema
from coordinator.protocol.service import ClientInfo
from coordinator.security.acl import AclAuthorizer
from coordinator.security.acl_sources import parse_acl_text
from coordinator.security.audit import AuditLog
from coordinator.service import GroupCoordinatorService

from ..group.context import topic as topic_image
from ..runtime.fakes import FakeStateTopic

PARTITIONS = 2
ADMIN = ClientInfo("admin-tool", "127.0.0.1", 1, "test", principal="User:admin")
ALICE = ClientInfo("app", "10.0.0.7", 2, "test", principal="User:alice")
ACLS = """
ALLOW User:alice * ALL   GROUP LITERAL *
DENY  User:alice * ALL   GROUP LITERAL hidden
ALLOW User:alice * READ  TOPIC LITERAL t
ALLOW User:bob   * READ  TOPIC LITERAL secret
"""
IMAGE = MetadataImage.of([topic_image("t", 4), topic_image("secret", 2)])
SECRET_ID = IMAGE.topics_by_name["secret"].topic_id
T_ID = IMAGE.topics_by_name["t"].topic_id


async def service_with(audit=None) -> GroupCoordinatorService:
    authorizer = AclAuthorizer(parse_acl_text(ACLS), super_users={"User:admin"})
    service = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=PARTITIONS),
                                      FakeStateTopic(PARTITIONS), authorizer=authorizer, audit=audit)  # type: ignore[arg-type]
    service.on_metadata_update(IMAGE)
    await service.start()
    return service


def commit_req(group: str, *topics: str, version: int = 9):
    mod = schema("offset_commit", version, "request")
    parts = tuple(mod.OffsetCommitRequestPartition(partition_index=p, committed_offset=7, committed_leader_epoch=-1,
                                                   committed_metadata="") for p in (0, 1))
    made = tuple(mod.OffsetCommitRequestTopic(**({"name": t} if version < 10 else {"topic_id": IMAGE.topics_by_name[
        t].topic_id}), partitions=parts) for t in topics)
    return mod.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                   group_instance_id=None, topics=made)


def by_topic(resp) -> list:
    return [(getattr(t, "name", None) or t.topic_id, [int(p.error_code) for p in t.partitions]) for t in resp.topics]


def fetch_v7(group: str, topics=None):
    mod = schema("offset_fetch", 7, "request")
    named = None if topics is None else tuple(mod.OffsetFetchRequestTopic(name=t, partition_indexes=(0, 1))
                                              for t in topics)
    return mod.OffsetFetchRequest(group_id=group, topics=named, require_stable=False)


def fetched(resp) -> list:
    return [(getattr(t, "name", None) or t.topic_id, [(p.partition_index, p.committed_offset, int(p.error_code))
                                                      for p in t.partitions]) for t in resp.topics]


TAF = int(ErrorCode.topic_authorization_failed)


def denied_count(api: str, resource_type: str) -> float:
    return REGISTRY.get_sample_value("kcoord_authorization_denied_total",
                                     {"api": api, "resource_type": resource_type}) or 0.0


def test_offset_commit_refuses_unreadable_topics_per_partition_and_commits_the_rest_in_order():
    async def main():
        service = await service_with()
        before = denied_count("OffsetCommit", "TOPIC")
        resp = await service.handle(8, 9, commit_req("g", "secret", "t"), ALICE)
        assert by_topic(resp) == [("secret", [TAF, TAF]), ("t", [0, 0])]
        assert denied_count("OffsetCommit", "TOPIC") == before + 1
        # what was written: t only (read back as the super user)
        assert fetched(await service.handle(9, 7, fetch_v7("g"), ADMIN)) == [("t", [(0, 7, 0), (1, 7, 0)])]

        # every topic refused: the handler is not run, nothing is written
        logs_before = {p: len(log) for p, log in service.state_topic.logs.items()}
        resp = await service.handle(8, 9, commit_req("g2", "secret"), ALICE)
        assert by_topic(resp) == [("secret", [TAF, TAF])]
        assert {p: len(log) for p, log in service.state_topic.logs.items()} == logs_before

        # v10 names topics by id: resolved through the metadata image
        resp = await service.handle(8, 10, commit_req("g3", "t", "secret", version=10), ALICE)
        assert by_topic(resp) == [(T_ID, [0, 0]), (SECRET_ID, [TAF, TAF])]
        # the group check still comes first
        resp = await service.handle(8, 9, commit_req("hidden", "t"), ALICE)
        assert {p.error_code for t in resp.topics for p in t.partitions} == {ErrorCode.group_authorization_failed}
    asyncio.run(main())


def test_offset_fetch_drops_undescribable_topics_from_fetch_all_and_refuses_named_ones():
    async def main():
        service = await service_with()
        for g in ("g", "g2"):
            await service.handle(8, 9, commit_req(g, "t", "secret"), ADMIN)
        # v7, fetch-all: secret silently left out (the super user sees both)
        assert fetched(await service.handle(9, 7, fetch_v7("g"), ALICE)) == [("t", [(0, 7, 0), (1, 7, 0)])]
        assert sorted(t for t, _ in fetched(await service.handle(9, 7, fetch_v7("g"), ADMIN))) == ["secret", "t"]
        # v7, named: secret answers TOPIC_AUTHORIZATION_FAILED with offset -1, in request order
        resp = await service.handle(9, 7, fetch_v7("g", ["secret", "t"]), ALICE)
        assert fetched(resp) == [("secret", [(0, -1, TAF), (1, -1, TAF)]), ("t", [(0, 7, 0), (1, 7, 0)])]

        # v8 multi-group: per group, with a refused group answered on its own
        mod = schema("offset_fetch", 8, "request")
        req = mod.OffsetFetchRequest(require_stable=False, groups=(
            mod.OffsetFetchRequestGroup(group_id="g", topics=None),
            mod.OffsetFetchRequestGroup(group_id="g2", topics=(
                mod.OffsetFetchRequestTopics(name="t", partition_indexes=(0,)),
                mod.OffsetFetchRequestTopics(name="secret", partition_indexes=(1,)))),
            mod.OffsetFetchRequestGroup(group_id="hidden", topics=None)))
        resp = await service.handle(9, 8, req, ALICE)
        all_g, named_g, hidden = resp.groups
        assert fetched(all_g) == [("t", [(0, 7, 0), (1, 7, 0)])]
        assert fetched(named_g) == [("t", [(0, 7, 0)]), ("secret", [(1, -1, TAF)])]
        assert hidden.error_code == ErrorCode.group_authorization_failed

        # v10 by topic id
        mod = schema("offset_fetch", 10, "request")
        req = mod.OffsetFetchRequest(require_stable=False, groups=(
            mod.OffsetFetchRequestGroup(group_id="g", member_id=None, member_epoch=-1, topics=None),
            mod.OffsetFetchRequestGroup(group_id="g2", member_id=None, member_epoch=-1, topics=(
                mod.OffsetFetchRequestTopics(topic_id=SECRET_ID, partition_indexes=(0,)),))))
        all_g, named_g = (await service.handle(9, 10, req, ALICE)).groups
        assert fetched(all_g) == [(T_ID, [(0, 7, 0), (1, 7, 0)])]
        assert fetched(named_g) == [(SECRET_ID, [(0, -1, TAF)])]
    asyncio.run(main())


def cghb(group: str, member: str, topics, epoch: int = 0):
    hb = schema("consumer_group_heartbeat", 1, "request")
    return hb.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=topics, subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=() if epoch == 0 else None)


def test_consumer_heartbeat_needs_describe_on_subscribed_topics():
    async def main():
        service = await service_with()
        refused = await service.handle(68, 1, cghb("cg", "m" * 22, ("t", "secret")), ALICE)
        assert refused.error_code == ErrorCode.topic_authorization_failed
        assert not service.runtime_for("cg").shard.groups.get("cg"), "a refused join created the group"
        joined = await service.handle(68, 1, cghb("cg", "m" * 22, ("t",)), ALICE)
        assert joined.error_code == ErrorCode.none and joined.member_epoch > 0
        # a steady heartbeat sends no names: nothing to check
        steady = await service.handle(68, 1, cghb("cg", "m" * 22, None, joined.member_epoch), ALICE)
        assert steady.error_code == ErrorCode.none
    asyncio.run(main())


def test_consumer_group_describe_fails_groups_with_undescribable_topics_and_fills_operations():
    async def main():
        service = await service_with()
        assert (await service.handle(68, 1, cghb("open", "a" * 22, ("t",)), ALICE)).error_code == ErrorCode.none
        assert (await service.handle(68, 1, cghb("mixed", "b" * 22, ("t", "secret")), ADMIN)).error_code == \
            ErrorCode.none
        mod = schema("consumer_group_describe", 1, "request")
        req = mod.ConsumerGroupDescribeRequest(group_ids=("open", "mixed", "hidden"),
                                               include_authorized_operations=True)
        open_g, mixed, hidden = (await service.handle(69, 1, req, ALICE)).groups
        assert open_g.error_code == ErrorCode.none and open_g.members
        # ALL on the group: READ(3) DELETE(6) DESCRIBE(8) DESCRIBE_CONFIGS(10) ALTER_CONFIGS(11)
        assert open_g.authorized_operations == sum(1 << c for c in (3, 6, 8, 10, 11))
        assert mixed.error_code == ErrorCode.topic_authorization_failed and not mixed.members
        assert hidden.error_code == ErrorCode.group_authorization_failed
        admin_view = (await service.handle(69, 1, req, ADMIN)).groups
        assert [g.error_code for g in admin_view[:2]] == [ErrorCode.none, ErrorCode.none], "super user sees both"

        dg = schema("describe_groups", 5, "request").DescribeGroupsRequest(groups=("open",),
                                                                            include_authorized_operations=True)
        bob = ClientInfo("x", "10.0.0.9", 3, "test", principal="User:bob")
        described = (await service.handle(15, 5, dg, ALICE)).groups[0]
        assert described.authorized_operations == sum(1 << c for c in (3, 6, 8, 10, 11))
        assert (await service.handle(15, 5, dg, bob)).groups[0].error_code == ErrorCode.group_authorization_failed
    asyncio.run(main())


def test_offset_delete_needs_topic_read():
    async def main():
        service = await service_with()
        await service.handle(8, 9, commit_req("g", "t", "secret"), ADMIN)
        od = schema("offset_delete", 0, "request")
        req = od.OffsetDeleteRequest(group_id="g", topics=tuple(
            od.OffsetDeleteRequestTopic(name=n, partitions=(od.OffsetDeleteRequestPartition(partition_index=0),))
            for n in ("secret", "t")))
        resp = await service.handle(47, 0, req, ALICE)
        assert resp.error_code == ErrorCode.none
        assert by_topic(resp) == [("secret", [TAF]), ("t", [0])]
        left = fetched(await service.handle(9, 7, fetch_v7("g"), ADMIN))
        assert dict(left)["secret"][0] == (0, 7, 0), "the refused deletion kept secret's offset"
        assert (0, 7, 0) not in dict(left)["t"]
    asyncio.run(main())


def test_list_groups_hides_what_the_client_may_not_describe():
    async def main():
        service = await service_with()
        for g in ("open", "hidden"):
            await service.handle(8, 9, commit_req(g, "t"), ADMIN)
        req = schema("list_groups", 4, "request").ListGroupsRequest(states_filter=())
        assert sorted(g.group_id for g in (await service.handle(16, 4, req, ALICE)).groups) == ["open"]
        assert sorted(g.group_id for g in (await service.handle(16, 4, req, ADMIN)).groups) == ["hidden", "open"]
    asyncio.run(main())


def test_group_mutations_are_audited_as_json_lines(tmp_path):
    path = tmp_path / "audit.log"
    audit = AuditLog.from_settings({"audit.log": str(path)})
    assert audit is not None

    async def main():
        service = await service_with(audit)
        await service.handle(8, 9, commit_req("g", "t"), ALICE)
        await service.handle(8, 9, commit_req("hidden", "t"), ALICE)
        joined = await service.handle(68, 1, cghb("cg", "m" * 22, ("t",)), ALICE)
        await service.handle(68, 1, cghb("cg", "m" * 22, None, joined.member_epoch), ALICE)   # not audited
        await service.handle(68, 1, cghb("cg", "m" * 22, None, -1), ALICE)
        dl = schema("delete_groups", 2, "request").DeleteGroupsRequest(groups_names=("hidden", "g"))
        await service.handle(42, 2, dl, ALICE)
    asyncio.run(main())
    audit.close()
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert [(e["api"], e["action"], e["group"], e["outcome"]) for e in lines] == [
        ("OffsetCommit", "commit", "g", "NONE"),
        ("OffsetCommit", "commit", "hidden", "GROUP_AUTHORIZATION_FAILED"),
        ("ConsumerGroupHeartbeat", "join", "cg", "NONE"),
        ("ConsumerGroupHeartbeat", "leave", "cg", "NONE"),
        ("DeleteGroups", "delete", "hidden", "GROUP_AUTHORIZATION_FAILED"),
        ("DeleteGroups", "delete", "g", "NONE"),
    ]
    assert {(e["principal"], e["client"], e["listener"], e["client_id"]) for e in lines} == {
        ("User:alice", "10.0.0.7:2", "test", "app")}
    assert all(e["ts"].endswith("Z") for e in lines)
