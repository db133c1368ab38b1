"""What the membership shell (membership.py) needs to know about its upstream group, apart
from the join/sync/heartbeat loop itself: the link it talks through, the group's name, how
the loop ends or starts over (its exceptions, and which error codes raise which:
`raise_for`), and whether the upstream's group coordinator carries static
members (KIP-345), which decides between a static and a dynamic member.

Rules: no I/O here; `static_membership_works` judges only from the API keys the upstream's
ApiVersions listed.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from .protocol import Endpoint


class Link(Protocol):
    async def request(self, request: Any, timeout: float = ...) -> Any: ...

    def close(self) -> None: ...


# Opens a link to the first reachable (host, port); raises on failure.
OpenLink = Callable[[Sequence[tuple[str, int]]], Awaitable[Link]]


class MembershipFenced(Exception):
    """Another process joined with this instance id (FENCED_INSTANCE_ID)."""


class MembershipRefused(Exception):
    """The upstream refuses the membership group: this principal (GROUP_AUTHORIZATION_FAILED;
    docs/user/cluster.md lists the ACLs kcoord needs), or this session timeout
    (INVALID_SESSION_TIMEOUT: outside the broker's group.min/max.session.timeout.ms). Retrying
    cannot help; the message names what to change."""


class NotAlone(Exception):
    """A watcher (a plain `kcoord serve`) learnt that another kcoord uses its state topic."""

    def __init__(self, others: dict[str, Endpoint]) -> None:
        self.others = dict(others)
        super().__init__(", ".join(f"{i} at {e.host}:{e.port}" for i, e in sorted(self.others.items()))
                         or "another member")


class Rejoin(Exception):
    """Join again (a rebalance, a revoke, a lost membership)."""


class Lost(Rejoin):
    """The group no longer knows this member (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION): its
    shards are dropped before it joins again (Kafka's `onPartitionsLost`)."""


class Refind(Exception):
    """Find the group's coordinator again (NOT_COORDINATOR and the like)."""


_REFIND = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                     ErrorCode.coordinator_load_in_progress})
_LOST = frozenset({ErrorCode.unknown_member_id, ErrorCode.illegal_generation})


def raise_for(code: ErrorCode, api: str, group_id: str, instance_id: str, session_ms: int | None = None) -> None:
    """Nothing for NONE; else the exception that says what the membership does next."""
    if code == ErrorCode.none:
        return
    if code == ErrorCode.invalid_session_timeout:
        # Kafka answers it to a JoinGroup whose session timeout lies outside the broker's
        # group.min.session.timeout.ms..group.max.session.timeout.ms (6,000..1,800,000 by default).
        asked = f"={session_ms}" if session_ms is not None else ""
        raise MembershipRefused(f"{api} of group {group_id} answered INVALID_SESSION_TIMEOUT: kcoord's "
                                f"cluster.session.timeout.ms{asked} lies outside the broker's "
                                "group.min.session.timeout.ms..group.max.session.timeout.ms; set it inside them")
    if code == ErrorCode.fenced_instance_id:
        raise MembershipFenced(f"{api}: FENCED_INSTANCE_ID for {instance_id}")
    if code == ErrorCode.group_authorization_failed:
        raise MembershipRefused(f"{api} of group {group_id} answered GROUP_AUTHORIZATION_FAILED: grant "
                                f"kcoord's principal Group READ on {group_id}")
    if code in _REFIND:
        raise Refind()
    if code in _LOST:
        raise Lost(code.name)
    if code == ErrorCode.rebalance_in_progress:
        raise Rejoin()
    raise RuntimeError(f"{api} answered {code.name}")


def ms_field(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(timedelta(milliseconds=ms))


# OffsetForLeaderEpoch (KIP-101, client-facing since KIP-320): every Apache Kafka broker
# since 0.11 advertises it; Tansu 0.6, which has no replication, does not.
_OFFSET_FOR_LEADER_EPOCH = 23


def static_membership_works(api_keys: frozenset[int] | set[int]) -> bool:
    """Whether the upstream's group coordinator carries static members (KIP-345), judged by
    the API keys its ApiVersions lists.

    Tansu 0.6 (tansu-broker/src/coordinator/group/administrator.rs at 510f3e2) does not:
    - a static member that rejoins with new metadata (a cooperative follow-up: it revoked
      shards) reopens the group at the *same* generation (`Inner<Formed>::join`, line 2716
      bumps it only for dynamic members); a member that already synced that generation
      keeps getting NONE to its heartbeats (line 2952 compares generations) and never
      hears of the follow-up assignment: seen, a joiner stays without shards for good;
    - it holds a static member's JoinGroup *and* SyncGroup for at least PAUSE_MS = 3 s each
      (lines 912, 1106) and never refreshes a member's last contact on SyncGroup (the
      controller's `missed_heartbeat` runs only for dynamic members, lines 853, 1056, 1360),
      so with a short session a peer's heartbeat can evict it (lines 1541-1625) and it
      gets UNKNOWN_MEMBER_ID (what an earlier run saw).
    Dynamic members are refreshed on every request, including each 1 s poll of a waiting
    SyncGroup, and any change starts a new generation. Tansu has no replication and does
    not list OffsetForLeaderEpoch, which every Apache Kafka broker since 0.11 does."""
    return _OFFSET_FOR_LEADER_EPOCH in api_keys


def group_name(state_topic: str) -> str:
    """The membership group of the processes sharing a state topic."""
    return f"kcoord.{state_topic}"
