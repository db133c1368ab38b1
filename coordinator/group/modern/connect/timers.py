"""The connect group's timers: one timer kind, "connect", whose keys name what is due.

Rules (those of timers.py): a key is a tuple whose first element is its kind; scheduling
a key replaces the pending one; the handler (connect_heartbeat.on_timer, the connect
contribution's handler of the kind: contribution.py) re-checks that what armed it still holds.

Keys:
- ("connect", "session", group, member): the worker's session expired: fence it;
- ("connect", "rebalance", group, member), payload = the epoch it had to leave: it did
  not revoke within its rebalance timeout (001:L125): fence it;
- ("connect", "assign", group): the assigner did not install within its rebalance
  timeout (000:L248): abandon the round, skip it once, ask another worker.
"""
from __future__ import annotations

from ...result import CancelTimer, TimerOp

KIND = "connect"


def session_key(group_id: str, member_id: str) -> tuple:
    return (KIND, "session", group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> tuple:
    return (KIND, "rebalance", group_id, member_id)


def assignment_deadline_key(group_id: str) -> tuple:
    return (KIND, "assign", group_id)


def cancel_member_timers(group_id: str, member_id: str) -> list[TimerOp]:
    return [CancelTimer(session_key(group_id, member_id)), CancelTimer(rebalance_key(group_id, member_id))]
