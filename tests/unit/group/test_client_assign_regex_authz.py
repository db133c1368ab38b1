"""The client-assignor heartbeat (32700) authorizes its topics as key 68 does (KAFKA-18813,
Kafka 4.0): its regex resolves only to topics the member's principal may DESCRIBE, and an
authorizer that must be prepared (authorizer=probe) is asked for the topics it names.
Through `GroupCoordinatorService.handle`, as the gateway calls it."""
from __future__ import annotations

import asyncio
import datetime
from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from coordinator.authz import Action
from coordinator.config import CoordinatorConfig
from coordinator.group.image import MetadataImage
from coordinator.protocol import private_messages as pm
from coordinator.protocol.private_apis import COMPUTE_ASSIGNMENT
from coordinator.protocol.service import ClientInfo
from coordinator.security.acl import AclAuthorizer
from coordinator.security.acl_sources import parse_acl_text
from coordinator.service import GroupCoordinatorService

from ..gateway.test_connection_flow import until
from ..runtime.fakes import FakeStateTopic
from .context import topic

TOPICS = (topic("orders-a", 2), topic("orders-b", 2), topic("orders-secret", 2), topic("other", 1))
ALICE = ClientInfo("app", "10.0.0.7", 2, "test", principal="User:alice")
ACLS = """
ALLOW User:alice * READ     GROUP LITERAL csa-g
ALLOW User:alice * DESCRIBE TOPIC PREFIXED orders-
DENY  User:alice * DESCRIBE TOPIC LITERAL orders-secret
"""
JOINED = (ErrorCode.none, COMPUTE_ASSIGNMENT)


async def _started(authorizer) -> GroupCoordinatorService:
    svc = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=1), FakeStateTopic(1),  # type: ignore[arg-type]
                                  authorizer=authorizer)
    svc.on_metadata_update(MetadataImage.of(TOPICS))
    await svc.start()
    return svc


def _join(names: tuple[str, ...] | None = None, regex: str | None = None) -> pm.CsaHeartbeatRequest:
    return pm.CsaHeartbeatRequest(
        group_id="csa-g", member_id="c" * 22, member_epoch=0, rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=names, subscribed_topic_regex=regex, topic_partitions=(),
        client_assignors=(pm.ClientAssignor(name="s", minimum_version=0, maximum_version=1, version=1),))


def test_the_regex_of_a_client_assignor_member_resolves_with_its_acls() -> None:
    async def main() -> None:
        svc = await _started(AclAuthorizer(parse_acl_text(ACLS)))
        joined = await svc.handle(pm.CSA_HEARTBEAT, 0, _join(regex="orders-.*"), ALICE)
        assert joined.error_code in JOINED
        group = svc.runtime_for("csa-g").shard.groups["csa-g"]
        # the regex-refresh timer runs on the loop; without the member's rights it never resolves
        await until(lambda: "orders-.*" in group.resolved_regexes, "the regex's resolution", 10.0)
        assert group.resolved_regexes["orders-.*"].topics == frozenset({"orders-a", "orders-b"})
        svc.close()
    asyncio.run(main())


class PreparedOnly:
    """authorizer=probe's contract (coordinator/security/acl_probe.py): a verdict that was not
    prepared before it is asked for is a refusal (fail closed)."""

    def __init__(self) -> None:
        self.prepared: set[Action] = set()

    async def prepare(self, client: ClientInfo, actions: Sequence[Action]) -> None:
        self.prepared.update(actions)

    def authorize(self, client: ClientInfo, actions: Sequence[Action]) -> list[bool]:
        return [a in self.prepared for a in actions]


def test_a_prepared_authorizer_is_asked_for_the_topics_of_a_client_assignor_heartbeat() -> None:
    async def main() -> None:
        authorizer = PreparedOnly()
        svc = await _started(authorizer)
        joined = await svc.handle(pm.CSA_HEARTBEAT, 0, _join(names=("orders-a",)), ALICE)
        assert joined.error_code in JOINED, joined
        assert Action("DESCRIBE", "TOPIC", "orders-a") in authorizer.prepared
        svc.close()
    asyncio.run(main())
