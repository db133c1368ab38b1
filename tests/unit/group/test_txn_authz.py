"""Authorization of the transactional APIs (issue 16 §2) through coordinator/authz.py's tables,
with the real ACL authorizer (coordinator/security/acl.py) and KafkaApis' order of checks:
TransactionalId WRITE, then Group READ, then (TxnOffsetCommit) Topic READ per topic."""
from __future__ import annotations

from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest

from coordinator import authz
from coordinator.protocol import apis
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


def test_the_tables_name_kafkas_operations():
    assert authz.TRANSACTIONAL_ID_OPERATIONS == {apis.TXN_OFFSET_COMMIT: authz.WRITE,
                                                 authz.ADD_OFFSETS_TO_TXN: authz.WRITE}
    assert authz.GROUP_OPERATIONS[apis.TXN_OFFSET_COMMIT] == authz.READ
    assert authz.GROUP_OPERATIONS[authz.ADD_OFFSETS_TO_TXN] == authz.READ
    assert authz.TOPIC_OPERATIONS[apis.TXN_OFFSET_COMMIT] == authz.READ
    assert authz.ADD_OFFSETS_TO_TXN not in authz.TOPIC_OPERATIONS


def test_txn_offset_commit_needs_transactional_id_write_and_group_read():
    a = authorizer()
    ok = txn_request("g", {"in": {0: 1}}, txn_id="app-1")
    assert not authz.transactional_id_denied(a, ALICE, apis.TXN_OFFSET_COMMIT, ok)
    assert authz.denied_groups(a, ALICE, apis.TXN_OFFSET_COMMIT, ok) == set()
    other_id = txn_request("g", {"in": {0: 1}}, txn_id="zzz-1")
    assert authz.transactional_id_denied(a, ALICE, apis.TXN_OFFSET_COMMIT, other_id)
    other_group = txn_request("h", {"in": {0: 1}}, txn_id="app-1")
    assert authz.denied_groups(a, ALICE, apis.TXN_OFFSET_COMMIT, other_group) == {"h"}
    verdicts = a.authorize(ALICE, [authz.Action(authz.TOPIC_OPERATIONS[apis.TXN_OFFSET_COMMIT], authz.TOPIC, t)
                                   for t in ("in", "secret")])
    assert verdicts == [True, False]


def test_add_offsets_to_txn_needs_transactional_id_write_and_group_read():
    a = authorizer()
    req = AddOffsetsToTxnRequest(transactional_id="app-7", producer_id=1, producer_epoch=0, group_id="g")
    assert authz.group_ids_of(authz.ADD_OFFSETS_TO_TXN, req) == ["g"]
    assert not authz.transactional_id_denied(a, ALICE, authz.ADD_OFFSETS_TO_TXN, req)
    assert authz.denied_groups(a, ALICE, authz.ADD_OFFSETS_TO_TXN, req) == set()
    bad = AddOffsetsToTxnRequest(transactional_id="other", producer_id=1, producer_epoch=0, group_id="h")
    assert authz.transactional_id_denied(a, ALICE, authz.ADD_OFFSETS_TO_TXN, bad)
    assert authz.denied_groups(a, ALICE, authz.ADD_OFFSETS_TO_TXN, bad) == {"h"}
    # APIs without a transactional id are not asked about one.
    assert not authz.transactional_id_denied(a, ALICE, apis.OFFSET_COMMIT, req)


# --------------------------------------------------------- the service's order of checks
def _service():
    from coordinator.config import CoordinatorConfig
    from coordinator.service import SERVED_APIS, GroupCoordinatorService

    from ..runtime.fakes import FakeStateTopic
    svc = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=2), FakeStateTopic(2),  # type: ignore[arg-type]
                                  authorizer=authorizer())
    # A log without raw reads serves no transactional offsets (AddOffsetsToTxn is then forwarded
    # upstream); the authorization order is checked on the service's own AddOffsetsToTxn.
    svc.register_api(next(a for a in SERVED_APIS if a.api_key == authz.ADD_OFFSETS_TO_TXN))
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
        assert (await svc.handle(authz.ADD_OFFSETS_TO_TXN, 4, bad_id, ALICE)).error_code \
            is ErrorCode.transactional_id_authorization_failed
        bad_group = AddOffsetsToTxnRequest(transactional_id="app-1", producer_id=1, producer_epoch=0, group_id="h")
        assert (await svc.handle(authz.ADD_OFFSETS_TO_TXN, 4, bad_group, ALICE)).error_code \
            is ErrorCode.group_authorization_failed
    asyncio.run(main())
