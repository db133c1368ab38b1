"""Kafka's ACL model and how a verdict is reached, for kcoord's own authorizer.

The facts this follows (Kafka's documented authorizer semantics, KIP-11 and KIP-290):

- an ACL binds a resource pattern (resource type; LITERAL or PREFIXED; a name, where the
  LITERAL name ``*`` matches every resource of the type) to an entry (principal, where
  ``User:*`` matches every principal; host, where ``*`` matches every host; operation, where
  ALL matches every operation; permission ALLOW or DENY);
- a principal listed in ``super.users`` (semicolon-separated) is allowed everything;
- when no ACL at all matches the resource (whoever it names), the verdict is
  ``allow.everyone.if.no.acl.found`` (false by default, as in Kafka);
- otherwise a matching DENY wins over any ALLOW; a DENY matches only its own operation or ALL;
- an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and an ALLOW of ALTER_CONFIGS
  also allows DESCRIBE_CONFIGS (implication applies to ALLOW only: DENY READ does not deny
  DESCRIBE);
- anything else is denied.

`AclAuthorizer` answers `coordinator.authz.Authorizer` from an immutable `AclSet`: ACLs indexed
by (resource type, literal name), by resource type for the wildcard and by (resource type,
prefix) for prefixed patterns, with the lengths of the prefixes in use so a lookup walks only
those. Verdicts are cached per (principal, host, operation, resource type, name) and the cache
is dropped whenever the ACLs are replaced (`AclAuthorizer.replace`): the heartbeat path costs
one dict lookup per action.

ACL sources (`build_authorizer`): ``authorizer=file`` (acl_sources.FileAclSource),
``authorizer=upstream`` (acl_sources.UpstreamAclSource), ``authorizer=none``.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..authz import Action
    from ..protocol.service import ClientInfo

# Kafka's AclOperation codes (the bit positions of AuthorizedOperations).
OPERATION_CODES: dict[str, int] = {
    "UNKNOWN": 0, "ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7,
    "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11,
    "IDEMPOTENT_WRITE": 12, "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14, "TWO_PHASE_COMMIT": 15,
}
# What an ACL may name (ANY and UNKNOWN exist only in filters).
OPERATIONS = frozenset(OPERATION_CODES) - {"ANY", "UNKNOWN"}
RESOURCE_TYPES = frozenset({"TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"})
PATTERN_TYPES = frozenset({"LITERAL", "PREFIXED"})
PERMISSIONS = frozenset({"ALLOW", "DENY"})
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

# An ALLOW of any of these operations also allows the key (Kafka's implied operations).
_ALLOWED_BY: dict[str, frozenset[str]] = {
    "DESCRIBE": frozenset({"DESCRIBE", "READ", "WRITE", "DELETE", "ALTER", "ALL"}),
    "DESCRIBE_CONFIGS": frozenset({"DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALL"}),
}

# The operations Kafka reports in AuthorizedOperations, per resource type.
SUPPORTED_OPERATIONS: dict[str, tuple[str, ...]] = {
    "GROUP": ("READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    "TOPIC": ("READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    "CLUSTER": ("CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
                "DESCRIBE"),
    "TRANSACTIONAL_ID": ("DESCRIBE", "WRITE", "TWO_PHASE_COMMIT"),
}


class AclError(ValueError):
    """An ACL kcoord cannot hold; the message names the field and the value."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: str       # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER
    pattern_type: str        # LITERAL or PREFIXED
    name: str                # "*" (LITERAL) matches every name
    principal: str           # "User:alice"; "User:*" matches everyone
    host: str                # an IP address, or "*"
    operation: str           # READ, WRITE, ..., ALL
    permission: str          # ALLOW or DENY

    @classmethod
    def of(cls, resource_type: str, pattern_type: str, name: str, principal: str, host: str, operation: str,
           permission: str) -> AclBinding:
        """A checked binding (names upper-cased): raises AclError naming what is wrong."""
        rt, pt, op, perm = (resource_type.strip().upper(), pattern_type.strip().upper(),
                            operation.strip().upper(), permission.strip().upper())
        if rt not in RESOURCE_TYPES:
            raise AclError(f"resource type {resource_type!r} is not one of {', '.join(sorted(RESOURCE_TYPES))}")
        if pt not in PATTERN_TYPES:
            raise AclError(f"pattern type {pattern_type!r} is not LITERAL or PREFIXED")
        if op not in OPERATIONS:
            raise AclError(f"operation {operation!r} is not one of {', '.join(sorted(OPERATIONS))}")
        if perm not in PERMISSIONS:
            raise AclError(f"permission {permission!r} is not ALLOW or DENY")
        if not name:
            raise AclError("the resource name is empty")
        if pt == "PREFIXED" and name == WILDCARD:
            raise AclError("a PREFIXED pattern cannot be the wildcard '*' (use LITERAL '*')")
        if rt == "CLUSTER" and name != CLUSTER_NAME:
            raise AclError(f"the CLUSTER resource is named {CLUSTER_NAME!r}, not {name!r}")
        kind, sep, who = principal.partition(":")
        if not sep or not kind or not who:
            raise AclError(f"principal {principal!r} is not TYPE:NAME (for example User:alice)")
        if not host:
            raise AclError("the host is empty (use '*' for every host)")
        return cls(rt, pt, name, principal, host, op, perm)


def parse_super_users(text: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (Kafka's broker setting)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


def parse_bool(name: str, text: str | None, default: bool = False) -> bool:
    if text is None or text.strip() == "":
        return default
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise AclError(f"--config {name}={text!r}: expected true or false")


class AclSet:
    """An immutable, indexed set of ACLs."""

    __slots__ = ("bindings", "_literal", "_wildcard", "_prefixed", "_prefix_lengths")

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self.bindings: tuple[AclBinding, ...] = tuple(dict.fromkeys(bindings))   # de-duplicated, in order
        literal: dict[tuple[str, str], list[AclBinding]] = defaultdict(list)
        wildcard: dict[str, list[AclBinding]] = defaultdict(list)
        prefixed: dict[tuple[str, str], list[AclBinding]] = defaultdict(list)
        lengths: dict[str, set[int]] = defaultdict(set)
        for b in self.bindings:
            if b.pattern_type == "PREFIXED":
                prefixed[(b.resource_type, b.name)].append(b)
                lengths[b.resource_type].add(len(b.name))
            elif b.name == WILDCARD:
                wildcard[b.resource_type].append(b)
            else:
                literal[(b.resource_type, b.name)].append(b)
        self._literal = {k: tuple(v) for k, v in literal.items()}
        self._wildcard = {k: tuple(v) for k, v in wildcard.items()}
        self._prefixed = {k: tuple(v) for k, v in prefixed.items()}
        self._prefix_lengths = {k: tuple(sorted(v)) for k, v in lengths.items()}

    def __len__(self) -> int:
        return len(self.bindings)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AclSet) and set(self.bindings) == set(other.bindings)

    def __hash__(self) -> int:
        return hash(frozenset(self.bindings))

    def matching(self, resource_type: str, name: str) -> list[AclBinding]:
        """Every ACL whose pattern matches the resource, whoever it names."""
        out: list[AclBinding] = []
        found = self._literal.get((resource_type, name))
        if found:
            out.extend(found)
        found = self._wildcard.get(resource_type)
        if found:
            out.extend(found)
        lengths = self._prefix_lengths.get(resource_type)
        if lengths:
            prefixed = self._prefixed
            for n in lengths:
                if n > len(name):
                    break
                found = prefixed.get((resource_type, name[:n]))
                if found:
                    out.extend(found)
        return out


def decide(acls: AclSet, super_users: frozenset[str], allow_if_no_acl: bool, principal: str, host: str,
           operation: str, resource_type: str, name: str) -> bool:
    """Kafka's verdict for one action (the module docstring lists the rules)."""
    if principal in super_users:
        return True
    matching = acls.matching(resource_type, name)
    if not matching:
        return allow_if_no_acl
    allowed_by = _ALLOWED_BY.get(operation)
    allowed = False
    for b in matching:
        if (b.principal != principal and b.principal != WILDCARD_PRINCIPAL) or (b.host != host and b.host != WILDCARD):
            continue
        if b.permission == "DENY":
            if b.operation == operation or b.operation == "ALL":
                return False
        elif not allowed:
            allowed = (b.operation in allowed_by) if allowed_by is not None else (
                b.operation == operation or b.operation == "ALL")
    return allowed


# The verdict cache holds at most this many entries; past it, it starts over.
CACHE_LIMIT = 200_000


class AclAuthorizer:
    """`coordinator.authz.Authorizer` over an `AclSet`, with `super.users` and
    `allow.everyone.if.no.acl.found`.

    ``ready`` False (a source that has not loaded yet: ``authorizer=upstream`` before its first
    successful DescribeAcls) denies everything but super users: fail closed."""

    def __init__(self, acls: AclSet | Iterable[AclBinding] = (), *, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False, ready: bool = True) -> None:
        self.acls = acls if isinstance(acls, AclSet) else AclSet(acls)
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.ready = ready
        self.generation = 0          # bumped on every replace (tests, the source's log)
        self._cache: dict[tuple[str, str, str, str, str], bool] = {}

    def replace(self, acls: AclSet | Iterable[AclBinding]) -> None:
        """Install a new ACL set (atomically for the event loop) and drop cached verdicts."""
        self.acls = acls if isinstance(acls, AclSet) else AclSet(acls)
        self.ready = True
        self.generation += 1
        self._cache = {}

    def allows(self, principal: str, host: str, operation: str, resource_type: str, name: str) -> bool:
        key = (principal, host, operation, resource_type, name)
        cache = self._cache
        verdict = cache.get(key)
        if verdict is None:
            if not self.ready:
                return principal in self.super_users
            verdict = decide(self.acls, self.super_users, self.allow_everyone_if_no_acl_found, *key)
            if len(cache) >= CACHE_LIMIT:
                cache.clear()
            cache[key] = verdict
        return verdict

    def authorize(self, client: ClientInfo, actions: Sequence[Action]) -> list[bool]:
        principal, host = client.principal, client.host
        cache = self._cache
        out = []
        for a in actions:       # the cache lookup inlined: this is the heartbeat path
            verdict = cache.get((principal, host, a.operation, a.resource_type, a.name))
            out.append(verdict if verdict is not None else
                       self.allows(principal, host, a.operation, a.resource_type, a.name))
        return out


def settings_flags(settings: Mapping[str, str]) -> tuple[frozenset[str], bool]:
    """(`super.users`, `allow.everyone.if.no.acl.found`) from kcoord's settings."""
    return (parse_super_users(settings.get("super.users")),
            parse_bool("allow.everyone.if.no.acl.found", settings.get("allow.everyone.if.no.acl.found")))
