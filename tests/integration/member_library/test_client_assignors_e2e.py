"""A17 (seed-drafts.md §4; issue 17 point 4): client-side assignors end to end, through a
real kcoord in front of a real broker, measured on consumption.

Three Python members are real consumers: `Kip848Consumer` (members/aiokafka_consumer.py:
KIP-848 membership by the member library, fetching by aiokafka, offsets committed with
the member epoch), each an OS process of its own (kip848_member.py), bringing the sample
sticky assignor on kcoord's private key 32700. A producer writes to every one of the 12
partitions throughout the test. The phases and the group's mode in each:
1. client mode: four Python members alone; one of them computes 3/3/3/3
   (Prepare -> assign -> Install), ConsumerGroupDescribe shows assignor "sticky".
2. client mode: a Python member is killed (SIGKILL: no leave heartbeat, no commit). Every
   partition is owned again (4/4/4, computed by a surviving member) and consumed again
   (a record fetched from it by its owner after the kill; for the killed member's
   partitions, by their new owner) within 2 s of its session timeout (3 s here); the
   group is still in client mode.
3. server mode: a librdkafka consumer joins (key 68, no client assignor). A member
   without a list switches the group to server mode rather than being rejected
   (docs/design/client-assignors.md, "How a round works" 2); the four share the partitions
   3/3/3/3 and the described assignor is the server's.
4. server mode: another Python member is killed; the same bound as in 2.
5. server mode: another Python member leaves gracefully (revoke, commit, leave). Every
   partition is owned again (6/6) and consumed again within 2 s of the leave.
No partition is ever owned by two members at once, and no member consumes a record of a
partition it does not own at that moment: both checked on the members' own ownership
histories (support.ownership ledger: each member's assigned/revoked/lost callbacks, and
the killed member's "gone" at the SIGKILL, all stamped on CLOCK_MONOTONIC).
"""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from migration.rehearse.member import MemberProcess
from support.admin import create_topic
from support.consumer_events import ConsumedRecord
from support.kcoord import FAST, KcoordProcess
from support.ownership import OwnershipLedger
from support.produce import make_producer
from support.raw_client import call_with
from support.wait import wait_until

PARTITIONS = 12
SESSION_MS = 3_000
BUDGET_S = 2.0       # A17: consumed again within 2 s of the session timeout / of the leave
CONFIG = (*[c for c in FAST if not c.startswith("consumer_session_timeout_ms")],
          f"consumer_session_timeout_ms={SESSION_MS}", f"consumer_min_session_timeout_ms={SESSION_MS}")
PROGRAM = Path(__file__).with_name("kip848_member.py")


class PyMember:
    """A `Kip848Consumer` in a process of its own (kip848_member.py), run by the rehearsal
    tool's client-neutral MemberProcess (argv in, JSON events out; "close" on stdin leaves,
    kill() is SIGKILL)."""

    def __init__(self, slot: int, bootstrap: str, topic: str, group: str) -> None:
        self.member = f"py-{slot}"
        self.proc = MemberProcess(slot, 1, "consumer", [
            sys.executable, str(PROGRAM), "--bootstrap", bootstrap, "--topic", topic, "--group", group,
            "--name", self.member, "--client-assignor"], client_id=self.member)
        self.gone_ns: int | None = None

    def start(self) -> PyMember:
        self.proc.start()
        return self

    def wait_ready(self) -> None:
        wait_until(lambda: self.proc.events("ready") or not self.proc.alive(), 30,
                   message=lambda: f"{self.member} ready; stderr:\n{self.proc.stderr_tail()}")
        assert self.proc.events("ready"), f"{self.member} exited: {self.proc.stderr_tail()}"

    def kill(self) -> int:
        """SIGKILL: no leave heartbeat, no commit; it owns nothing from this moment on."""
        self.gone_ns = time.monotonic_ns()
        return self.proc.kill()

    def assignment(self) -> frozenset[tuple[str, int]]:
        return frozenset() if self.gone_ns is not None else self.proc.assignment()

    def consumed(self) -> list[ConsumedRecord]:
        return [ConsumedRecord(self.member, e["topic"], e["partition"], e["offset"], e["value"], e["t"])
                for e in self.proc.events("record")]

    def errors(self) -> list[dict]:
        return self.proc.events("error")

    def history_into(self, ledger: OwnershipLedger) -> None:
        """The member's own ownership history, as its callbacks stamped it."""
        for e in self.proc.events():
            if e["event"] in ("assigned", "revoked", "lost"):
                ledger.record(e["t"], self.member, e["event"], [(t, p) for t, p in e["partitions"]])
        if self.gone_ns is not None:
            ledger.member_gone(self.gone_ns, self.member)


class SteadyProducer:
    """One record to every partition every `interval` s, on a thread, until stopped: every
    partition always has something new for its owner to fetch."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval: float = 0.05) -> None:
        self.topic, self.partitions, self.interval = topic, partitions, interval
        self.producer = make_producer(bootstrap)
        self.failed: list[str] = []
        self.delivered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="a17-producer", daemon=True)

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def _report(self, err, msg) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.delivered += 1

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            for p in range(self.partitions):
                self.producer.produce(self.topic, value=f"a17-{n}".encode(), partition=p, on_delivery=self._report)
                n += 1
            self.producer.poll(0)
            self._stop.wait(self.interval)      # pacing, not a condition
        self.producer.flush(10)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(20)


def _described_assignor(bootstrap: str, group: str) -> str:
    described = call_with(bootstrap, 69, 1, group_ids=(group,), include_authorized_operations=False).groups[0]
    return described.assignor_name


def _consumed_again(consumers, since_ns: int, departed: str = "") -> dict[int, int]:
    """partition -> first stamp after `since_ns` of a record fetched from it by a member that
    is not `departed` (the departed member's own last records are not "again"; for its
    partitions this is the new owner). Only partitions with such a record are listed."""
    first: dict[int, int] = {}
    for c in consumers:
        if c.member == departed:
            continue
        for r in c.consumed():
            if r.t_ns > since_ns and (r.partition not in first or r.t_ns < first[r.partition]):
                first[r.partition] = r.t_ns
    return first


def test_a17_sticky_python_members_and_librdkafka(upstream, names, drivers, request):
    from support.rdkafka import RdkafkaConsumer

    kcoord = KcoordProcess(upstream=upstream.bootstrap, state_topic=f"__kcoord_{names.topic()}",
                           config=CONFIG).start()
    producer: SteadyProducer | None = None
    py: list[PyMember] = []
    rd = None
    rd_ledger = OwnershipLedger()       # librdkafka's callbacks, live; the Python members' join it below

    def ownership() -> OwnershipLedger:
        """Every member's own history, on one time line."""
        ledger = OwnershipLedger()
        for e in rd_ledger.events():
            ledger.record(e.t_ns, e.member, e.event, e.partitions)
        for m in py:
            m.history_into(ledger)
        return ledger

    try:
        bootstrap = kcoord.bootstrap
        topic, group = names.topic(), names.group()
        create_topic(bootstrap, topic, PARTITIONS)
        producer = SteadyProducer(bootstrap, topic, PARTITIONS).start()

        py += [PyMember(i, bootstrap, topic, group).start() for i in range(4)]
        for m in py:
            m.wait_ready()

        def covered(members, sizes):
            sets = [m.assignment() for m in members]
            return sorted(len(s) for s in sets) == sizes and len(frozenset().union(*sets)) == PARTITIONS

        def shares(members):
            def describe() -> str:
                text = f"{[(m.member, sorted(p for _, p in m.assignment())) for m in members]}"
                for m in members:      # a Python member's own account: alive, last events, stderr
                    if isinstance(m, PyMember):
                        last = [(e["event"], e.get("epoch")) for e in m.proc.events() if e["event"] != "record"][-6:]
                        text += (f"\n  {m.member}: alive={m.proc.alive()} last events {last}\n"
                                 f"  stderr: {m.proc.stderr_tail(8)}")
                return text + f"\n  kcoord log: {kcoord.log_path}"
            return describe

        def kill_and_measure(victim: PyMember, survivors: list, mode: str) -> None:
            """SIGKILL `victim`; every partition owned and consumed again by `survivors`
            (4/4/4) within the session timeout + BUDGET_S."""
            victim_owned = {p for _, p in victim.assignment()}
            victim.kill()
            killed_ns = victim.gone_ns
            assert killed_ns is not None
            deadline_s = SESSION_MS / 1000 + BUDGET_S
            wait_until(lambda: covered(survivors, [4, 4, 4]) and
                       len(_consumed_again(survivors, killed_ns, victim.member)) == PARTITIONS,
                       deadline_s + 3,
                       message=lambda: f"after the kill ({mode}): {shares(survivors)()}, consumed again: "
                                       f"{sorted(_consumed_again(survivors, killed_ns, victim.member))}")
            owned_s = (_owned_again_ns(ownership(), topic, killed_ns) - killed_ns) / 1e9
            again = _consumed_again(survivors, killed_ns, victim.member)
            moved_s = max(again[p] - killed_ns for p in victim_owned) / 1e9
            all_s = max(again.values()) / 1e9 - killed_ns / 1e9
            print(f"\nA17 [{request.node.name}] kill in {mode}: owned again {owned_s:.2f}s, killed member's "
                  f"partitions {sorted(victim_owned)} consumed again {moved_s:.2f}s, every partition "
                  f"{all_s:.2f}s after the SIGKILL (session timeout {SESSION_MS / 1000:.0f}s)")
            assert owned_s <= deadline_s, f"partitions owned again {owned_s:.2f}s after the kill ({mode})"
            assert all_s <= deadline_s, f"every partition consumed again only {all_s:.2f}s after the kill ({mode})"

        # 1. client mode
        wait_until(lambda: covered(py, [3, 3, 3, 3]), 60, message=shares(py))
        assert _described_assignor(bootstrap, group) == "sticky"      # a member's Install
        assert kcoord.process is not None and kcoord.process.poll() is None

        # 2. kill py-3 in client mode: a surviving member computes the new assignment
        kill_and_measure(py[3], py[:3], "client mode")
        assert _described_assignor(bootstrap, group) == "sticky", "still client mode after the kill"

        # 3. server mode: librdkafka joins
        rd = drivers.add(RdkafkaConsumer(bootstrap, topic, group, member="rd-1", ledger=rd_ledger,
                                         group_protocol="consumer"))
        rd.start()
        everyone = [*py[:3], rd]
        wait_until(lambda: covered(everyone, [3, 3, 3, 3]), 60, message=shares(everyone))
        server_assignor = _described_assignor(bootstrap, group)
        assert server_assignor != "sticky", "a member without client assignors switches the group to server mode"
        print(f"\nA17 [{request.node.name}] modes: client (sticky), then server ({server_assignor})")
        start_ns = time.monotonic_ns()
        wait_until(lambda: len(_consumed_again(everyone, start_ns)) == PARTITIONS, 30,
                   message=lambda: f"every partition consumed: {sorted(_consumed_again(everyone, start_ns))}")

        # 4. kill py-1 in server mode
        kill_and_measure(py[1], [py[0], py[2], rd], "server mode")

        # 5. py-0 leaves gracefully (MemberProcess.close stamps "close_requested", then waits for the exit)
        leaver = py[0]
        leaver_owned = {p for _, p in leaver.assignment()}
        closing = threading.Thread(target=leaver.proc.close, name="a17-leave", daemon=True)
        closing.start()
        leave_ns = wait_until(lambda: next((e["t"] for e in leaver.proc.events("close_requested")), None), 5)
        rest = [py[2], rd]
        wait_until(lambda: covered(rest, [6, 6]) and
                   len(_consumed_again(rest, leave_ns, leaver.member)) == PARTITIONS,
                   BUDGET_S + 3,
                   message=lambda: f"after the leave: {shares(rest)()}, consumed again: "
                                   f"{sorted(_consumed_again(rest, leave_ns, leaver.member))}")
        closing.join(60)
        assert leaver.proc.events("exited")[0]["returncode"] == 0, leaver.proc.stderr_tail()
        assert leaver.assignment() == frozenset() and leaver.proc.events("closed")
        owned_s = (_owned_again_ns(ownership(), topic, leave_ns) - leave_ns) / 1e9
        again = _consumed_again(rest, leave_ns, leaver.member)
        leave_moved_s = max(again[p] - leave_ns for p in leaver_owned) / 1e9
        leave_all_s = max(again.values()) / 1e9 - leave_ns / 1e9
        print(f"A17 leave: owned again {owned_s:.2f}s, leaver's partitions {sorted(leaver_owned)} consumed "
              f"again {leave_moved_s:.2f}s, every partition {leave_all_s:.2f}s after the leave")
        assert owned_s <= BUDGET_S, f"partitions owned again {owned_s:.2f}s after the leave"
        assert leave_all_s <= BUDGET_S, f"every partition consumed again only {leave_all_s:.2f}s after the leave"
        assert _described_assignor(bootstrap, group) == server_assignor     # still server mode

        # the members' own ownership histories
        ledger = ownership()
        assert ledger.violations() == [], _history(ledger, py, kcoord)
        consumed: list[ConsumedRecord] = [r for c in (*py, rd) for r in c.consumed()]
        outside = ledger.records_outside_ownership(consumed)
        assert consumed and outside == [], \
            f"records consumed outside the member's ownership: {outside[:5]}\n{ledger.report()}"
        assert not [e for c in (*py, rd) for e in c.errors() if e.get("fatal")]
        assert producer.failed == [] and producer.delivered > 0
    finally:
        for m in py:        # before kcoord stops, so that the live ones can still leave
            if m.proc.alive():
                m.proc.close(timeout=20)
        if rd is not None:
            rd.shutdown()
        if producer is not None:
            producer.stop()
        if kcoord.process is not None and kcoord.process.poll() is None:
            kcoord.stop()


def _owned_again_ns(ledger: OwnershipLedger, topic: str, since_ns: int) -> int:
    """The first moment after `since_ns` from which every partition has an owner without a
    break (the members' own histories)."""
    points = sorted({since_ns, *(t for ivs in ledger.intervals().values() for iv in ivs
                                 for t in (iv.start_ns, iv.end_ns) if t is not None and t >= since_ns)})
    candidate = None
    for t in points:
        owners = ledger.owners_at(t)
        if all(owners.get((topic, p)) for p in range(PARTITIONS)):
            candidate = t if candidate is None else candidate
        else:
            candidate = None
    assert candidate is not None, f"some partition has no owner at the end:\n{ledger.report()}"
    return candidate


def _history(ledger: OwnershipLedger, py: list[PyMember], kcoord: KcoordProcess) -> str:
    """A failure's evidence: the overlaps, every ownership change with the member epoch it
    happened at, and where kcoord's log is."""
    origin = ledger.origin_ns()
    epochs = {(m.member, e["t"]): e.get("epoch") for m in py for e in m.proc.events()}
    lines = [f"+{(e.t_ns - origin) / 1e9:.3f}s {e.member} {e.event} {[p for _, p in e.partitions]} "
             f"epoch={epochs.get((e.member, e.t_ns))}" for e in ledger.events()]
    return f"{ledger.report()}\n" + "\n".join(lines) + f"\nkcoord log: {kcoord.log_path}"
