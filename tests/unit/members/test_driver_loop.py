"""members/_loop.py, the request loop `MemberDriver` (members/driver.py) and `ConnectDriver`
(members/connect/driver.py) share, driven through each driver with its own vocabulary:
a scripted state machine stands in for ConsumerMember / ConnectWorker, and the driver's
`_call` answers in place of a coordinator (the real wire is covered end to end by
tests/integration/member_library/ and tests/integration/connect_groups/).

Checked for both drivers: the listener's callback is awaited before the machine hears
(`revoked()`/`assigned()`: revoke before assign); a failed request goes to
`request_failed` on a new connection; Rediscover drops the connection; Fatal raises
MemberFatal; `stop` makes the machine leave, revoking first, and `run()` returns once it
has left; heartbeats go on while a callback runs, and a member fenced meanwhile does not
answer the callback's action and reports what it had just assigned lost.
"""
from __future__ import annotations

import asyncio
import enum

import pytest

from members import consumer as mc
from members._loop import MemberFatal
from members.connect import worker as cw
from members.connect.driver import ConnectDriver, WorkerListener
from members.driver import Listener, MemberDriver


class Script:
    """A machine that answers each heartbeat with the next list of actions; `revoked()`
    answers with `after_revoke` (as a real machine follows a revocation with the assignment)."""

    def __init__(self, state: type[enum.Enum], answers: list[list[object]], leave_with: list[object],
                 log: list[str], after_revoke: list[object] = (), interval_ms: int = 10) -> None:
        self.group_id, self.States, self.state = "g", state, state.JOINING
        self.answers, self.leave_with, self.log = answers, leave_with, log
        self.after_revoke, self.interval_ms = list(after_revoke), interval_ms
        self.next_poll_ms = 0
        self.pending: object | None = None

    def _give(self, actions: list[object]) -> list[object]:
        self.pending = next((a for a in actions if type(a).__name__ in ("Revoke", "Assign")), self.pending)
        return actions

    def poll(self, now_ms: int) -> object | None:
        if now_ms < self.next_poll_ms or self.state is self.States.LEFT:
            return None
        self.next_poll_ms = now_ms + self.interval_ms
        return "leave-heartbeat" if self.state is self.States.LEAVING else "heartbeat"

    def request_failed(self, now_ms: int) -> None:
        self.log.append("machine.request_failed")

    def on_heartbeat(self, response: object, now_ms: int) -> list[object]:
        if self.state is self.States.LEAVING:
            self.state = self.States.LEFT
            return []
        self.state = self.States.STABLE
        answer = self.answers.pop(0) if self.answers else []
        if any(type(a).__name__ == "Lost" for a in answer):
            self.pending = None                     # fenced: the unanswered action is dropped
        return self._give(answer)

    def leave(self, now_ms: int) -> list[object]:
        self.log.append("machine.leave")
        self.state = self.States.LEAVING
        return self._give(list(self.leave_with))

    def revoked(self, now_ms: int) -> list[object]:
        self.log.append("machine.revoked")
        self.pending = None
        follow, self.after_revoke = self.after_revoke, []
        return self._give(follow)

    def assigned(self, now_ms: int) -> list[object]:
        self.log.append("machine.assigned")
        self.pending = None
        return []


def _recording(base: type, log: list[str], fail_first: bool):
    class Recording(base):
        failures = 1 if fail_first else 0

        async def _call(self, request: object) -> object:
            log.append(f"call {request}")
            if self.failures:
                self.failures -= 1
                raise ConnectionResetError("coordinator went away")
            return "response"

        async def _drop(self) -> None:
            log.append("drop")

    return Recording


def _listener(base: type, log: list[str]):
    class Recording(base):
        async def on_revoke(self, what) -> None:
            await asyncio.sleep(0)              # the machine must not be told meanwhile
            log.append(f"listener.on_revoke {what!r}")

        async def on_assign(self, what) -> None:
            await asyncio.sleep(0)
            log.append(f"listener.on_assign {what!r}")

        async def on_lost(self, what) -> None:
            log.append(f"listener.on_lost {what!r}")

    return Recording()


MEMBER = (MemberDriver, Listener, mc)
CONNECT = (ConnectDriver, WorkerListener, cw)


def _payload(module, n: int):
    """What one Revoke/Assign/Lost hands over: a worker's units, a member's partitions."""
    return frozenset({(f"c{n}", -1)}) if module is cw else {"t": frozenset({n})}


def _shown(module, n: int) -> str:
    return repr(_payload(module, n))


@pytest.mark.parametrize("kind", [MEMBER, CONNECT], ids=["MemberDriver", "ConnectDriver"])
async def test_callbacks_before_the_machine_hears_and_leave_on_stop(kind):
    driver_cls, listener_cls, module = kind
    log: list[str] = []
    field = "units" if module is cw else "partitions"
    answers = [[module.Revoke(**{field: _payload(module, 1)})],
               [module.Lost(**{field: _payload(module, 2)}), module.Rediscover()]]
    machine = Script(module.State, answers, [module.Revoke(**{field: _payload(module, 3)})], log,
                     after_revoke=[module.Assign(**{field: _payload(module, 2)})], interval_ms=200)
    driver = _recording(driver_cls, log, fail_first=True)(machine, "h:1", _listener(listener_cls, log))
    stop = asyncio.Event()
    task = asyncio.create_task(driver.run(stop))
    deadline = asyncio.get_running_loop().time() + 5
    while "drop" not in log[3:]:                    # up to the Rediscover's drop
        assert asyncio.get_running_loop().time() < deadline, f"no Rediscover within 5 s: {log}"
        await asyncio.sleep(0.005)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert machine.state is module.State.LEFT
    assert log == [
        "call heartbeat", "drop", "machine.request_failed",            # failed: new connection, backoff
        "call heartbeat",
        f"listener.on_revoke {_shown(module, 1)}", "machine.revoked",  # revoke awaited, then reported
        f"listener.on_assign {_shown(module, 2)}", "machine.assigned",
        "call heartbeat", f"listener.on_lost {_shown(module, 2)}", "drop",
        "machine.leave", f"listener.on_revoke {_shown(module, 3)}", "machine.revoked",
        "call leave-heartbeat", "drop",                                  # left: the connection closes
    ]


@pytest.mark.parametrize("kind", [MEMBER, CONNECT], ids=["MemberDriver", "ConnectDriver"])
async def test_fatal_stops_the_loop(kind):
    driver_cls, listener_cls, module = kind
    log: list[str] = []
    machine = Script(module.State, [[module.Fatal(error_code=41, message="unknown")]], [], log)
    driver = _recording(driver_cls, log, fail_first=False)(machine, "h:1", _listener(listener_cls, log))
    with pytest.raises(MemberFatal) as e:
        await asyncio.wait_for(driver.run(asyncio.Event()), 5)
    assert e.value.error_code == 41 and log == ["call heartbeat", "drop"]


async def _until(predicate, what: str, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


def _held(listener_cls: type, log: list[str], release: asyncio.Event) -> type:
    """A listener whose on_assign holds until ``release`` is set."""
    class Held(listener_cls):
        async def on_assign(self, what) -> None:
            log.append("listener.on_assign begins")
            await release.wait()
            log.append("listener.on_assign ends")

        async def on_lost(self, what) -> None:
            log.append(f"listener.on_lost {what!r}")

    return Held


@pytest.mark.parametrize("kind", [MEMBER, CONNECT], ids=["MemberDriver", "ConnectDriver"])
async def test_heartbeats_go_on_during_a_slow_callback_and_fencing_drops_its_answer(kind):
    driver_cls, listener_cls, module = kind
    log: list[str] = []
    field = "units" if module is cw else "partitions"
    release = asyncio.Event()
    Slow = _held(listener_cls, log, release)

    # heartbeat 1 assigns 2; 2 and 3 (during the callback) bring nothing; 4 fences (1 was owned)
    answers = [[module.Assign(**{field: _payload(module, 2)})], [], [], [module.Lost(**{field: _payload(module, 1)})]]
    machine = Script(module.State, answers, [], log, interval_ms=20)
    driver = _recording(driver_cls, log, fail_first=False)(machine, "h:1", Slow())
    stop = asyncio.Event()
    task = asyncio.create_task(driver.run(stop))
    await _until(lambda: log.count("call heartbeat") >= 4, "heartbeats during the callback")
    assert "listener.on_assign ends" not in log        # still in the callback: the session was kept
    release.set()
    await _until(lambda: sum(x.startswith("listener.on_lost") for x in log) == 2, "both losses")
    stop.set()
    await asyncio.wait_for(task, 5)
    assert "machine.assigned" not in log                # the fenced machine is not answered
    assert log.index("listener.on_assign ends") < log.index(f"listener.on_lost {_shown(module, 2)}")
    assert f"listener.on_lost {_shown(module, 1)}" in log


@pytest.mark.parametrize("kind", [MEMBER, CONNECT], ids=["MemberDriver", "ConnectDriver"])
async def test_a_compute_asked_during_a_callback_runs_at_once(kind):
    """The whole group waits on the asked member's Install; it needs nothing of the
    application, so a slow (here: stuck) callback must not hold it back."""
    driver_cls, listener_cls, module = kind
    log: list[str] = []
    field = "units" if module is cw else "partitions"
    release = asyncio.Event()
    Stuck = _held(listener_cls, log, release)

    class Computing(_recording(driver_cls, log, fail_first=False)):
        async def _compute(self) -> None:
            log.append("compute")

    answers = [[module.Assign(**{field: _payload(module, 2)})], [module.Compute()]]
    machine = Script(module.State, answers, [], log, interval_ms=20)
    driver = Computing(machine, "h:1", Stuck())
    stop = asyncio.Event()
    task = asyncio.create_task(driver.run(stop))
    await _until(lambda: "compute" in log, "the Compute during the callback")
    assert "listener.on_assign ends" not in log        # the callback still holds
    release.set()
    await _until(lambda: "machine.assigned" in log, "the assignment acknowledged")
    stop.set()
    await asyncio.wait_for(task, 5)
    assert log.count("compute") == 1
    assert log.index("listener.on_assign begins") < log.index("compute") < log.index("listener.on_assign ends")
