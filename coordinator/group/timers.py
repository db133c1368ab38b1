"""Every timer of the group core: its kind, its key, and (in shard.py) its handler.

Rules:
- A timer is data: `ScheduleTimer(key, deadline_ms, payload)` in a `Result`; the runtime
  owns the clock and calls `shard.on_timer(key, payload, now_ms)` when it is due.
- A key is a tuple whose first element is its kind; scheduling a key replaces the timer
  with that key (Kafka's `CoordinatorTimer.schedule`), so one key = one pending deadline.
- Each kind has exactly one handler, in the table `GroupCoordinatorShard` builds from
  `TimerKind` (shard.py `_TIMER_HANDLERS`), as `replay` has one per record type. A kind
  without a handler is a startup error, not a silent drop.
- A handler re-checks that what armed the timer still holds (the member is still there, at
  the same epoch); a stale timer answers an empty `Result`.

Kinds (Kafka's names where Kafka has the timer):
- consumer groups (KIP-848): `session-timeout` (member fenced), `rebalance-timeout`
  (member did not revoke in time, payload = the epoch it had to leave), `assignment`
  (KIP-1263: compute the target assignment the interval held back), `regex-refresh`,
  `client-assignment` (the client-side assignor spec: the asked assigner's deadline, modern/consumer/client_mode.py);
- classic members of a consumer group: `join-timeout`, `sync-timeout`;
- classic groups: `classic-join` (complete the join), `classic-sync` (leader never synced),
  `classic-heartbeat` (member session);
- connect groups (docs/design/connect-groups-spec.md): `connect`, one kind whose keys name what is due (a
  worker's session, its rebalance timeout, the assigner's deadline; modern/connect/timers.py);
- the shard: `expire-group-metadata` (offsets retention and empty-group cleanup),
  `topics-deleted` (offsets of deleted topics, payload = the topic names).
"""
from __future__ import annotations

import enum

from .result import CancelTimer, TimerOp


class TimerKind(enum.StrEnum):
    SESSION = "session-timeout"
    REBALANCE = "rebalance-timeout"
    JOIN = "join-timeout"
    SYNC = "sync-timeout"
    ASSIGNMENT = "assignment"
    REGEX_REFRESH = "regex-refresh"
    CLASSIC_JOIN = "classic-join"
    CLASSIC_SYNC = "classic-sync"
    CLASSIC_HEARTBEAT = "classic-heartbeat"
    EXPIRE = "expire-group-metadata"
    TOPICS_DELETED = "topics-deleted"
    CONNECT = "connect"
    CLIENT_ASSIGNMENT = "client-assignment"
    STREAMS = "streams"


# The string values are the keys' first elements (plain str, so keys stay hashable tuples of
# str and compare equal to the literals tests and older code use).
SESSION, REBALANCE, JOIN, SYNC = (TimerKind.SESSION.value, TimerKind.REBALANCE.value,
                                  TimerKind.JOIN.value, TimerKind.SYNC.value)
ASSIGNMENT, REGEX_REFRESH = TimerKind.ASSIGNMENT.value, TimerKind.REGEX_REFRESH.value
CLASSIC_JOIN, CLASSIC_SYNC, CLASSIC_HEARTBEAT = (TimerKind.CLASSIC_JOIN.value, TimerKind.CLASSIC_SYNC.value,
                                                 TimerKind.CLASSIC_HEARTBEAT.value)
TOPICS_DELETED = TimerKind.TOPICS_DELETED.value
CLIENT_ASSIGNMENT = TimerKind.CLIENT_ASSIGNMENT.value
EXPIRE_KEY = (TimerKind.EXPIRE.value,)


# --- consumer groups ---------------------------------------------------------------
def session_timer(group_id: str, member_id: str) -> tuple:
    return (SESSION, group_id, member_id)


def rebalance_timer(group_id: str, member_id: str) -> tuple:
    return (REBALANCE, group_id, member_id)


def join_timer(group_id: str, member_id: str) -> tuple:
    return (JOIN, group_id, member_id)


def sync_timer(group_id: str, member_id: str) -> tuple:
    return (SYNC, group_id, member_id)


def assignment_key(group_id: str) -> tuple:
    return (ASSIGNMENT, group_id)


def regex_refresh_key(group_id: str) -> tuple:
    return (REGEX_REFRESH, group_id)


def cancel_member_timers(group_id: str, member_id: str) -> list[TimerOp]:
    return [CancelTimer(session_timer(group_id, member_id)),
            CancelTimer(rebalance_timer(group_id, member_id)),
            CancelTimer(join_timer(group_id, member_id)),
            CancelTimer(sync_timer(group_id, member_id))]


# --- classic groups ----------------------------------------------------------------
def join_key(group_id: str) -> tuple:
    return (CLASSIC_JOIN, group_id)


def sync_key(group_id: str) -> tuple:
    return (CLASSIC_SYNC, group_id)


def heartbeat_key(group_id: str, member_id: str) -> tuple:
    return (CLASSIC_HEARTBEAT, group_id, member_id)


# --- the shard ---------------------------------------------------------------------
def topics_deleted_key(image_version: int) -> tuple:
    return (TOPICS_DELETED, image_version)
