"""Authorization of the transactional APIs through their rows of the API table
(coordinator/protocol/api_table.py) and coordinator/authz.py,
with the real ACL authorizer (coordinator/security/acl.py) and KafkaApis' order of checks:
TransactionalId WRITE, then Group READ, then (TxnOffsetCommit) Topic READ per topic."""
from __future__ import annotations

from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest

from coordinator import authz
from coordinator.protocol import apis
from coordinator.protocol.api_table import CORE_TABLE
from coordinator.protocol.service import ClientInfo
from coordinator.security.acl import AclAuthorizer
from coordinator.security.acl_sources import parse_acl_text

from .test_txn_offset_commit import txn_request

ALICE = ClientInfo(client_id="app", host="10.0.0.1", port=1, listener="CLIENT", principal="User:alice")
ACLS = """
ALLOW User:alice * WRITE TRANSACTIONAL_ID PREFIXED app-
ALLOW User:alice * READ GROUP LITERAL g
ALLOW User:alice * READ TOPIC LITERAL in
"""


def authorizer() -> AclAuthorizer:
    return AclAuthorizer(parse_acl_text(ACLS))


TXN = CORE_TABLE[apis.TXN_OFFSET_COMMIT]
ADD = CORE_TABLE[apis.ADD_OFFSETS_TO_TXN]


def test_the_rows_name_kafkas_operations():
    assert {k: s.transactional_id_operation for k, s in CORE_TABLE.items() if s.transactional_id_operation} == \
        {apis.TXN_OFFSET_COMMIT: authz.WRITE, apis.ADD_OFFSETS_TO_TXN: authz.WRITE}
    assert TXN.group_operation == authz.READ and ADD.group_operation == authz.READ
    assert TXN.topic_operation == authz.READ and ADD.topic_operation is None


def test_txn_offset_commit_needs_transactional_id_write_and_group_read():
    a = authorizer()
    ok = txn_request("g", {"in": {0: 1}}, txn_id="app-1")
    assert not authz.transactional_id_denied(a, ALICE, TXN, ok)
    assert authz.denied_groups(a, ALICE, TXN, 3, ok) == set()
    other_id = txn_request("g", {"in": {0: 1}}, txn_id="zzz-1")
    assert authz.transactional_id_denied(a, ALICE, TXN, other_id)
    other_group = txn_request("h", {"in": {0: 1}}, txn_id="app-1")
    assert authz.denied_groups(a, ALICE, TXN, 3, other_group) == {"h"}
    verdicts = a.authorize(ALICE, [authz.Action(TXN.topic_operation, authz.TOPIC, t)
                                   for t in ("in", "secret")])
    assert verdicts == [True, False]


def test_add_offsets_to_txn_needs_transactional_id_write_and_group_read():
    a = authorizer()
    req = AddOffsetsToTxnRequest(transactional_id="app-7", producer_id=1, producer_epoch=0, group_id="g")
    assert ADD.group_ids_of(4, req) == ["g"]
    assert not authz.transactional_id_denied(a, ALICE, ADD, req)
    assert authz.denied_groups(a, ALICE, ADD, 4, req) == set()
    bad = AddOffsetsToTxnRequest(transactional_id="other", producer_id=1, producer_epoch=0, group_id="h")
    assert authz.transactional_id_denied(a, ALICE, ADD, bad)
    assert authz.denied_groups(a, ALICE, ADD, 4, bad) == {"h"}
    # APIs without a transactional id are not asked about one.
    assert not authz.transactional_id_denied(a, ALICE, CORE_TABLE[apis.OFFSET_COMMIT], req)


# --------------------------------------------------------- the service's order of checks
def _service():
    from coordinator.config import CoordinatorConfig
    from coordinator.service import GroupCoordinatorService

    from ..runtime.fakes import FakeStateTopic
    svc = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=2), FakeStateTopic(2),  # type: ignore[arg-type]
                                  authorizer=authorizer())
    # A log without raw reads serves no transactional offsets (AddOffsetsToTxn is then forwarded
    # upstream); the authorization order is checked on the service's own AddOffsetsToTxn.
    svc.register_api(ADD)
    return svc


def _codes(response) -> set:
    return {p.error_code for t in response.topics for p in t.partitions}


def test_the_service_asks_the_transactional_id_first_then_the_group_then_the_topics():
    import asyncio

    from kio.schema.errors import ErrorCode

    async def main():
        svc = _service()
        # Not the client's transactional id: refused on every partition, whatever the group.
        r = await svc.handle(apis.TXN_OFFSET_COMMIT, 3, txn_request("h", {"in": {0: 1}}, txn_id="zzz"), ALICE)
        assert _codes(r) == {ErrorCode.transactional_id_authorization_failed}
        r = await svc.handle(apis.TXN_OFFSET_COMMIT, 3, txn_request("h", {"in": {0: 1}}, txn_id="app-1"), ALICE)
        assert _codes(r) == {ErrorCode.group_authorization_failed}
        # Topic READ per topic: the refused topic answers TOPIC_AUTHORIZATION_FAILED; the rest
        # reaches the handler (here: a state log without raw reads, UNSUPPORTED_VERSION).
        r = await svc.handle(apis.TXN_OFFSET_COMMIT, 3,
                             txn_request("g", {"in": {0: 1}, "secret": {0: 1}}, txn_id="app-1"), ALICE)
        by_topic = {t.name: {p.error_code for p in t.partitions} for t in r.topics}
        assert by_topic == {"in": {ErrorCode.unsupported_version}, "secret": {ErrorCode.topic_authorization_failed}}
        # AddOffsetsToTxn: the same first two checks.
        bad_id = AddOffsetsToTxnRequest(transactional_id="zzz", producer_id=1, producer_epoch=0, group_id="h")
        assert (await svc.handle(apis.ADD_OFFSETS_TO_TXN, 4, bad_id, ALICE)).error_code \
            is ErrorCode.transactional_id_authorization_failed
        bad_group = AddOffsetsToTxnRequest(transactional_id="app-1", producer_id=1, producer_epoch=0, group_id="h")
        assert (await svc.handle(apis.ADD_OFFSETS_TO_TXN, 4, bad_group, ALICE)).error_code \
            is ErrorCode.group_authorization_failed
    asyncio.run(main())
