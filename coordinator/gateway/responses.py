"""A client connection's answers, in request order.

Kafka answers the requests of a connection strictly in the order they were sent. Each
entry is either a ready answer (bytes: served here at once) or a `forward.Pending` that
an upstream answer or a group call that had to wait fills in later. The connection
writes every ready entry at the head in one write (connection.py ``flush``) and reads the
entries on its hot path directly: this is a deque, so appending an answer costs what
appending to a deque costs. Entries leave only from the head, once written.

When the client goes away, the requests already handed to the GroupService run to
completion (as in Kafka a JoinGroup goes on when its client disconnects); only their
answers are dropped (``drop``).
"""
from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from .forward import Pending
    from .limits import Limits

Entry = Union[bytes, "Pending"]


class ResponseQueue(deque):  # type: ignore[type-arg]
    __slots__ = ()

    def head_is_local(self) -> bool:
        """The oldest unanswered request waits for the GroupService (not for upstream)."""
        if not self:
            return False
        head = self[0]
        return head.__class__ is not bytes and head.task is not None and head.data is None

    def owes_answer(self) -> bool:
        """The oldest request has no answer yet (upstream's or the GroupService's)."""
        if not self:
            return False
        head = self[0]
        return head.__class__ is not bytes and head.data is None

    def drop(self, limits: Limits, keep_until_done: Callable[[asyncio.Task[None]], None]) -> None:
        """The client went away: every request leaves the process-wide queue; calls still
        running are kept until they finish."""
        for entry in self:
            if entry.__class__ is bytes:
                continue
            if entry.size:
                limits.queued_requests -= 1
                limits.queued_bytes -= entry.size
                entry.size = 0
            task = entry.task
            if task is not None and not task.done():
                keep_until_done(task)
        self.clear()
