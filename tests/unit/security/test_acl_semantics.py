"""Kafka's ACL semantics in coordinator/security/acl.py, table-driven: literal, prefixed and
wildcard patterns, wildcard principals and hosts, DENY wins, implied operations, super users and
allow.everyone.if.no.acl.found; the verdict cache is dropped when the ACLs change."""
from __future__ import annotations

import pytest

from coordinator.authz import Action, authorized_operations
from coordinator.protocol.service import ClientInfo
from coordinator.security.acl import AclAuthorizer, AclBinding, AclError, AclSet, parse_super_users


def acl(rt, pattern, name, principal="User:alice", host="*", op="READ", perm="ALLOW") -> AclBinding:
    return AclBinding.of(rt, pattern, name, principal, host, op, perm)


ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER_HOST = "10.0.0.7", "10.0.0.8"

# (ACLs, principal, host, operation, resource type, name, expected verdict, why)
CASES = [
    ([acl("GROUP", "LITERAL", "orders")], ALICE, HOST, "READ", "GROUP", "orders", True, "literal match"),
    ([acl("GROUP", "LITERAL", "orders")], ALICE, HOST, "READ", "GROUP", "orders-2", False, "literal is exact"),
    ([acl("GROUP", "LITERAL", "orders")], ALICE, HOST, "READ", "TOPIC", "orders", False, "other resource type"),
    ([acl("GROUP", "LITERAL", "orders")], BOB, HOST, "READ", "GROUP", "orders", False, "other principal"),
    ([acl("GROUP", "PREFIXED", "ord")], ALICE, HOST, "READ", "GROUP", "orders", True, "prefix match"),
    ([acl("GROUP", "PREFIXED", "ord")], ALICE, HOST, "READ", "GROUP", "ord", True, "prefix equal to the name"),
    ([acl("GROUP", "PREFIXED", "orders.")], ALICE, HOST, "READ", "GROUP", "orders", False, "prefix longer than name"),
    ([acl("GROUP", "PREFIXED", "xord")], ALICE, HOST, "READ", "GROUP", "orders", False, "not a prefix"),
    ([acl("GROUP", "LITERAL", "*")], ALICE, HOST, "READ", "GROUP", "anything", True, "wildcard resource name"),
    ([acl("GROUP", "LITERAL", "orders", principal="User:*")], BOB, HOST, "READ", "GROUP", "orders", True,
     "wildcard principal"),
    ([acl("GROUP", "LITERAL", "orders", host=HOST)], ALICE, HOST, "READ", "GROUP", "orders", True, "host match"),
    ([acl("GROUP", "LITERAL", "orders", host=HOST)], ALICE, OTHER_HOST, "READ", "GROUP", "orders", False,
     "other host"),
    ([acl("GROUP", "LITERAL", "orders", op="ALL")], ALICE, HOST, "DELETE", "GROUP", "orders", True, "ALL allows all"),
    ([acl("GROUP", "LITERAL", "orders", op="READ")], ALICE, HOST, "DELETE", "GROUP", "orders", False,
     "READ does not allow DELETE"),
    # implied operations: READ/WRITE/DELETE/ALTER allow DESCRIBE; ALTER_CONFIGS allows DESCRIBE_CONFIGS
    ([acl("TOPIC", "LITERAL", "t", op="READ")], ALICE, HOST, "DESCRIBE", "TOPIC", "t", True, "READ implies DESCRIBE"),
    ([acl("TOPIC", "LITERAL", "t", op="WRITE")], ALICE, HOST, "DESCRIBE", "TOPIC", "t", True,
     "WRITE implies DESCRIBE"),
    ([acl("TOPIC", "LITERAL", "t", op="DELETE")], ALICE, HOST, "DESCRIBE", "TOPIC", "t", True,
     "DELETE implies DESCRIBE"),
    ([acl("TOPIC", "LITERAL", "t", op="ALTER")], ALICE, HOST, "DESCRIBE", "TOPIC", "t", True,
     "ALTER implies DESCRIBE"),
    ([acl("TOPIC", "LITERAL", "t", op="CREATE")], ALICE, HOST, "DESCRIBE", "TOPIC", "t", False,
     "CREATE does not imply DESCRIBE"),
    ([acl("TOPIC", "LITERAL", "t", op="DESCRIBE")], ALICE, HOST, "READ", "TOPIC", "t", False,
     "DESCRIBE does not imply READ"),
    ([acl("TOPIC", "LITERAL", "t", op="ALTER_CONFIGS")], ALICE, HOST, "DESCRIBE_CONFIGS", "TOPIC", "t", True,
     "ALTER_CONFIGS implies DESCRIBE_CONFIGS"),
    ([acl("TOPIC", "LITERAL", "t", op="ALTER_CONFIGS")], ALICE, HOST, "DESCRIBE", "TOPIC", "t", False,
     "ALTER_CONFIGS does not imply DESCRIBE"),
    # DENY wins, and DENY is not implied
    ([acl("GROUP", "PREFIXED", "ord"), acl("GROUP", "LITERAL", "orders", perm="DENY")], ALICE, HOST, "READ",
     "GROUP", "orders", False, "literal DENY beats prefixed ALLOW"),
    ([acl("GROUP", "LITERAL", "orders"), acl("GROUP", "LITERAL", "*", principal="User:*", perm="DENY")], ALICE,
     HOST, "READ", "GROUP", "orders", False, "wildcard DENY beats literal ALLOW"),
    ([acl("GROUP", "LITERAL", "orders"), acl("GROUP", "LITERAL", "orders", host=OTHER_HOST, perm="DENY")], ALICE,
     HOST, "READ", "GROUP", "orders", True, "a DENY for another host does not apply"),
    ([acl("GROUP", "LITERAL", "orders", op="ALL"), acl("GROUP", "LITERAL", "orders", op="DELETE", perm="DENY")],
     ALICE, HOST, "READ", "GROUP", "orders", True, "a DENY of another operation does not apply"),
    ([acl("GROUP", "LITERAL", "orders", op="ALL"), acl("GROUP", "LITERAL", "orders", op="ALL", perm="DENY")],
     ALICE, HOST, "DESCRIBE", "GROUP", "orders", False, "DENY ALL denies DESCRIBE"),
    ([acl("TOPIC", "LITERAL", "t", op="DESCRIBE"), acl("TOPIC", "LITERAL", "t", op="READ", perm="DENY")], ALICE,
     HOST, "DESCRIBE", "TOPIC", "t", True, "DENY READ does not deny DESCRIBE"),
    # no ACL on the resource at all vs ACLs for someone else
    ([], ALICE, HOST, "READ", "GROUP", "orders", False, "no ACLs: denied by default"),
    ([acl("GROUP", "LITERAL", "orders", principal=BOB)], ALICE, HOST, "READ", "GROUP", "orders", False,
     "an ACL for someone else exists"),
]


@pytest.mark.parametrize("acls, principal, host, op, rt, name, expected, why", CASES,
                         ids=[c[-1] for c in CASES])
def test_verdicts_follow_kafka(acls, principal, host, op, rt, name, expected, why):
    authorizer = AclAuthorizer(acls)
    assert authorizer.allows(principal, host, op, rt, name) is expected, why
    # the cached verdict is the same
    assert authorizer.allows(principal, host, op, rt, name) is expected, why


def test_allow_everyone_if_no_acl_found_applies_only_to_resources_without_any_acl():
    authorizer = AclAuthorizer([acl("GROUP", "LITERAL", "orders", principal=BOB)],
                               allow_everyone_if_no_acl_found=True)
    assert authorizer.allows(ALICE, HOST, "READ", "GROUP", "unguarded")
    assert not authorizer.allows(ALICE, HOST, "READ", "GROUP", "orders"), "bob's ACL guards the group"
    prefixed = AclAuthorizer([acl("GROUP", "PREFIXED", "ord", principal=BOB)], allow_everyone_if_no_acl_found=True)
    assert not prefixed.allows(ALICE, HOST, "READ", "GROUP", "orders"), "a prefixed ACL guards the group too"


def test_super_users_are_allowed_everything_even_against_a_deny():
    authorizer = AclAuthorizer([acl("GROUP", "LITERAL", "*", principal="User:*", op="ALL", perm="DENY")],
                               super_users=parse_super_users(" User:admin ; User:ops;"))
    assert authorizer.allows("User:admin", HOST, "DELETE", "GROUP", "orders")
    assert authorizer.allows("User:ops", HOST, "READ", "TOPIC", "t")
    assert not authorizer.allows(ALICE, HOST, "READ", "GROUP", "orders")


def test_not_ready_denies_everyone_but_super_users_and_replace_makes_it_ready():
    authorizer = AclAuthorizer(super_users={"User:admin"}, allow_everyone_if_no_acl_found=True, ready=False)
    assert not authorizer.allows(ALICE, HOST, "READ", "GROUP", "g"), "fail closed before the first load"
    assert authorizer.allows("User:admin", HOST, "READ", "GROUP", "g")
    authorizer.replace([])
    assert authorizer.allows(ALICE, HOST, "READ", "GROUP", "g"), "loaded, no ACL, allow-if-none"


def test_replacing_the_acls_drops_cached_verdicts():
    authorizer = AclAuthorizer([acl("GROUP", "LITERAL", "orders")])
    client = ClientInfo("c", HOST, 1, "L", principal=ALICE)
    assert authorizer.authorize(client, [Action("READ", "GROUP", "orders")]) == [True]
    authorizer.replace([acl("GROUP", "LITERAL", "orders", perm="DENY")])
    assert authorizer.authorize(client, [Action("READ", "GROUP", "orders")]) == [False]


def test_authorize_answers_one_verdict_per_action_in_order_using_principal_and_host():
    authorizer = AclAuthorizer([acl("GROUP", "LITERAL", "a", host=HOST), acl("TOPIC", "PREFIXED", "t.")])
    at_host = ClientInfo("c", HOST, 1, "L", principal=ALICE)
    elsewhere = ClientInfo("c", OTHER_HOST, 1, "L", principal=ALICE)
    actions = [Action("READ", "GROUP", "a"), Action("READ", "GROUP", "b"), Action("DESCRIBE", "TOPIC", "t.x")]
    assert authorizer.authorize(at_host, actions) == [True, False, True]
    assert authorizer.authorize(elsewhere, actions) == [False, False, True]


def test_authorized_operations_is_kafkas_bitfield():
    client = ClientInfo("c", HOST, 1, "L", principal=ALICE)
    only_read = AclAuthorizer([acl("GROUP", "LITERAL", "g", op="READ")])
    # READ (3) and, implied, DESCRIBE (8)
    assert authorized_operations(only_read, client, "g") == (1 << 3) | (1 << 8)
    everything = AclAuthorizer([acl("GROUP", "LITERAL", "g", op="ALL")])
    assert authorized_operations(everything, client, "g") == sum(1 << c for c in (3, 6, 8, 10, 11))
    assert authorized_operations(AclAuthorizer([]), client, "g") == 0


@pytest.mark.parametrize("args, problem", [
    (("QUEUE", "LITERAL", "x", "User:a", "*", "READ", "ALLOW"), "resource type"),
    (("GROUP", "MATCH", "x", "User:a", "*", "READ", "ALLOW"), "pattern type"),
    (("GROUP", "LITERAL", "x", "User:a", "*", "ANY", "ALLOW"), "operation"),
    (("GROUP", "LITERAL", "x", "User:a", "*", "READ", "MAYBE"), "permission"),
    (("GROUP", "LITERAL", "x", "alice", "*", "READ", "ALLOW"), "principal"),
    (("GROUP", "PREFIXED", "*", "User:a", "*", "READ", "ALLOW"), "PREFIXED"),
    (("CLUSTER", "LITERAL", "c", "User:a", "*", "DESCRIBE", "ALLOW"), "kafka-cluster"),
])
def test_invalid_bindings_are_refused_with_the_reason(args, problem):
    with pytest.raises(AclError, match=problem):
        AclBinding.of(*args)


def test_acl_set_equality_ignores_order_and_duplicates():
    a, b = acl("GROUP", "LITERAL", "x"), acl("TOPIC", "PREFIXED", "y")
    assert AclSet([a, b, a]) == AclSet([b, a])
    assert len(AclSet([a, b, a])) == 2
    assert AclSet([a]) != AclSet([b])


def test_find_coordinator_keys_need_describe_on_the_group_or_transactional_id():
    from coordinator.authz import coordinator_keys_denied

    authorizer = AclAuthorizer([acl("GROUP", "LITERAL", "g", op="READ"), acl("TRANSACTIONAL_ID", "LITERAL", "tx",
                                                                            op="WRITE")])
    client = ClientInfo("c", HOST, 1, "L", principal=ALICE)
    assert coordinator_keys_denied(authorizer, client, 0, ["g", "other"]) == {"other"}
    assert coordinator_keys_denied(authorizer, client, 1, ["tx", "g"]) == {"g"}
    assert coordinator_keys_denied(authorizer, client, 2, ["share"]) == set()
