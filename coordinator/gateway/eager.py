"""Run a coroutine at once, and make a Task only if it really waits.

Most group requests never wait: a steady heartbeat reads the group, reschedules a timer
and answers, with no write to acknowledge. Wrapping each in an asyncio Task (creation,
a trip through the ready queue, a second loop iteration before the answer can be
written) was the biggest cost the profile showed outside the coordinator itself.
`start` steps the coroutine synchronously, as Python 3.12's eager tasks do; only a
coroutine that suspends gets a Task, which finishes it. The single-group APIs under ALLOW_ALL
(the steady heartbeat and OffsetCommit among them) skip even this: the service's starters run
them without a coroutine (GroupCoordinatorService.starters); the rest come here.
"""
from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any

_EAGER_START = sys.version_info >= (3, 12)   # asyncio.Task(..., eager_start=True)


class Done:
    """The coroutine finished without suspending: its ``value``, or the ``error`` it raised."""

    __slots__ = ("value", "error")

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value = value
        self.error = error


def start(coro: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop) -> Done | asyncio.Task:
    """Step ``coro`` now. Returns Done when it completed, else the Task that finishes it."""
    if _EAGER_START:
        task = asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg]
        if not task.done():
            return task
        if task.cancelled():
            return Done(error=asyncio.CancelledError())
        error = task.exception()
        return Done(error=error) if error is not None else Done(task.result())
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        return Done(stop.value)
    except (KeyboardInterrupt, SystemExit):
        raise                   # as a Task does: these are not the coroutine's result
    except BaseException as e:  # noqa: BLE001 - handed to the caller, as Task.exception() would be
        return Done(error=e)
    return loop.create_task(_resume(coro, yielded))


async def _resume(coro: Coroutine[Any, Any, Any], yielded: Any) -> Any:
    """Finish a coroutine that suspended outside any task, stepping it as Task.__step does:
    wait for the future it yielded, then send (its result is read by the coroutine's own
    ``await``) or throw (this task was cancelled while the future was still pending)."""
    while True:
        error: BaseException | None = None
        try:
            if yielded is None:
                await asyncio.sleep(0)      # a bare yield: give the loop one turn
            else:
                # The coroutine's own ``await`` marked the future as blocking; a Task
                # clears the mark when it takes the future over, and so must we.
                yielded._asyncio_future_blocking = False
                await yielded
        except asyncio.CancelledError as e:
            if yielded is None or not yielded.done():
                error = e
        except BaseException:  # noqa: BLE001 - the coroutine reads the future's exception itself
            pass
        try:
            yielded = coro.throw(error) if error is not None else coro.send(None)
        except StopIteration as stop:
            return stop.value
