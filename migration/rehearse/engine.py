"""The rehearsal: N member processes of one group restarted one by one with the other
group protocol, while a producer writes, a probe samples the group, and every member
reports what it owned, consumed and committed.

    observations = run_rehearsal(plan)       # drives real processes; never raises on a
    report = analyse(observations)           # misbehaving group: the report says what failed
"""
from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from collections.abc import Callable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from .analysis import end_offsets
from .member import MemberProcess, MemberSettings, member_argv
from .observations import MemberLog, Observations, StepLog
from .plan import RehearsalPlan, rolling_schedule
from .probe import GroupProbe, GroupSample
from .producer import WorkloadProducer

log = logging.getLogger("kcoord.rehearse")


class RehearsalAborted(RuntimeError):
    """A step could not complete (recorded in Observations.errors; the run still reports)."""


def ensure_topic(bootstrap: str, topic: str, partitions: int | None, default_partitions: int,
                 timeout: float = 15.0) -> int:
    """The topic's partition count, creating it first if it does not exist."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "kcoord-rehearse-admin"})
    # Metadata for all topics: asking for this one by name may auto-create it with broker defaults.
    md = admin.list_topics(timeout=timeout).topics.get(topic)
    if md is not None and md.error is None and md.partitions:
        return len(md.partitions)
    count = partitions or default_partitions
    future = admin.create_topics([NewTopic(topic, count, 1)], operation_timeout=timeout,
                                 request_timeout=timeout)[topic]
    try:
        future.result(timeout)
    except KafkaException as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=timeout).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == count:
            return count
        time.sleep(0.1)
    raise RehearsalAborted(f"topic {topic} not visible in metadata {timeout}s after creating it")


class Rehearsal:
    def __init__(self, plan: RehearsalPlan, progress: Callable[[str], None] | None = None) -> None:
        self.plan = plan
        self.progress = progress or (lambda msg: log.info("%s", msg))
        self.current: dict[int, MemberProcess] = {}
        self.all_processes: list[MemberProcess] = []
        self.partitions = 0
        self.settings: MemberSettings | None = None
        self.probe: GroupProbe | None = None
        self.obs: Observations | None = None

    # --- the run ----------------------------------------------------------------------------

    def run(self) -> Observations:
        plan = self.plan
        topic, group = plan.topic_name, plan.group_name
        self.partitions = ensure_topic(plan.bootstrap, topic, plan.partitions, 2 * plan.members)
        self.settings = MemberSettings(plan.bootstrap, topic, group, plan.client, plan.classic_session_timeout_ms,
                                       plan.classic_heartbeat_interval_ms, plan.classic_assignor, plan.java_cache)
        member_argv(self.settings, plan.start_protocol, "probe")  # fetch/compile Java before the clock starts
        obs = self.obs = Observations(
            plan={k: (str(v) if v is not None and not isinstance(v, (int, float, str, bool)) else v)
                  for k, v in dataclasses.asdict(plan).items()},
            topic=topic, group=group, partitions=self.partitions, t0_ns=time.monotonic_ns(),
            started_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"))
        self.progress(f"rehearse {plan.direction}{' and back' if plan.round_trip else ''}: {plan.members} "
                      f"{plan.client} members of group {group} on {topic} ({self.partitions} partitions) "
                      f"via {plan.bootstrap}")
        self.probe = GroupProbe(plan.bootstrap, group, topic, self.partitions, plan.sample_interval_s).start()
        producer = WorkloadProducer(plan.bootstrap, topic, plan.run_id, plan.produce_rate).start()
        try:
            self._rolling_restart(obs)
        except RehearsalAborted as exc:
            obs.errors.append(str(exc))
            self.progress(f"ABORTED: {exc}")
        except BaseException:  # Ctrl-C or a bug: no report, but no member process left behind
            self._kill_all()
            self.probe.stop(final_sample=False)
            producer.stop(5)
            raise
        obs.delivered = producer.stop()
        obs.t_produce_stopped = time.monotonic_ns()
        obs.producer_failures = list(producer.failed)
        try:
            self._drain(obs)
            self._close_all()
        except BaseException:
            self._kill_all()
            raise
        finally:
            obs.final_offsets = self.probe.offsets.read()
            self.probe.stop()
            obs.samples = self.probe.samples()
            obs.t_end = time.monotonic_ns()
            obs.members = [MemberLog(p.slot, p.incarnation, p.protocol, p.client_id, p.events())
                           for p in self.all_processes]
        return obs

    def _rolling_restart(self, obs: Observations) -> None:
        plan = self.plan
        for slot in range(plan.members):
            self._spawn(slot, plan.start_protocol)
        self._settle("all members started", time.monotonic_ns())
        obs.t_first_stable = time.monotonic_ns()
        self.progress(f"{plan.members} {plan.start_protocol} members consuming; warming up {plan.warmup_s}s")
        time.sleep(plan.warmup_s)
        for step in rolling_schedule(plan):
            record = StepLog(step)
            obs.steps.append(record)
            record.offsets_before = self.probe.offsets.read()
            old = self.current.pop(step.slot)
            record.t_close_requested = time.monotonic_ns()
            old.close()
            record.t_closed = time.monotonic_ns()
            if old.fatal_errors():
                obs.errors.append(f"step {step.index}: {old.name} reported {old.fatal_errors()[-1]}")
            new = self._spawn(step.slot, step.to_protocol)
            record.t_spawned = new.events("spawned")[0]["t"]
            self._settle(f"step {step.index} (m{step.slot} {step.from_protocol} -> {step.to_protocol})",
                         record.t_spawned)
            record.t_settled = time.monotonic_ns()
            record.offsets_after = self.probe.offsets.read()
            sample = self.probe.latest()
            self.progress(f"step {step.index}: m{step.slot} {step.from_protocol} -> {step.to_protocol}; group "
                          f"{sample.view.group_type if sample else '?'} {sample.view.state if sample else ''} "
                          f"epoch {sample.view.group_epoch if sample else '?'}")
            time.sleep(plan.dwell_s)

    def _spawn(self, slot: int, protocol: str) -> MemberProcess:
        incarnation = sum(1 for p in self.all_processes if p.slot == slot)
        client_id = f"rehearse-m{slot}.{incarnation}"
        assert self.settings is not None
        proc = MemberProcess(slot, incarnation, protocol, member_argv(self.settings, protocol, client_id),  # type: ignore[arg-type]
                             client_id)
        self.all_processes.append(proc)
        self.current[slot] = proc.start()
        return proc

    # --- waiting on the group ---------------------------------------------------------------

    def settled(self, sample: GroupSample) -> bool:
        """Every running member owns its share and the coordinator agrees the group is stable."""
        procs = list(self.current.values())
        if any(not p.alive() or p.fatal_errors() for p in procs):
            return False
        owned = [p.assignment() for p in procs]
        union = set().union(*owned)
        if len(union) != self.partitions or sum(map(len, owned)) != self.partitions:
            return False
        if self.partitions >= len(procs) and not all(owned):
            return False
        view = sample.view
        if view.state.lower() != "stable" or {m.client_id for m in view.members} != {p.client_id for p in procs}:
            return False
        if view.group_type == "consumer":
            return view.group_epoch == view.assignment_epoch and all(
                m.member_epoch == view.group_epoch for m in view.members)
        return True

    def _settle(self, what: str, after_ns: int) -> None:
        assert self.probe is not None
        deadline = time.monotonic() + self.plan.settle_timeout_s
        while time.monotonic() < deadline:
            dead = [p for p in self.current.values() if not p.alive() or p.fatal_errors()]
            if dead:
                p = dead[0]
                raise RehearsalAborted(f"{what}: member {p.name} ({p.protocol}) failed: "
                                       f"{(p.fatal_errors() or [{'exit': p.process.poll()}])[-1]}; "
                                       f"stderr tail:\n{p.stderr_tail(15)}")
            if self.probe.wait_for(self.settled, 0.5, after_ns) is not None:
                return
        latest = self.probe.latest()
        raise RehearsalAborted(
            f"{what}: group not stable within {self.plan.settle_timeout_s}s; "
            f"last view {latest.view if latest else None}; "
            f"members own {({p.name: sorted(p.assignment()) for p in self.current.values()})}")

    def _drain(self, obs: Observations) -> None:
        """Wait until every delivered record was consumed and the commits reached the end."""
        expected = {d.value for d in obs.delivered}
        end = end_offsets(obs.delivered)
        deadline = time.monotonic() + self.plan.drain_timeout_s
        while time.monotonic() < deadline:
            consumed = {e.get("value") for p in self.all_processes for e in p.events("record")}
            committed = self.probe.offsets.read() or {}
            if expected <= consumed and all(committed.get(p, -1) >= o for p, o in end.items()):
                self.progress(f"drained: {len(expected)} records consumed, offsets committed to the end")
                return
            if not self.current:
                break
            time.sleep(0.2)
        obs.errors.append(f"drain: not every record consumed and committed within {self.plan.drain_timeout_s}s")

    def _close_all(self) -> None:
        """Clean stops (commit, leave), one at a time as an operator would."""
        for slot in sorted(self.current):
            self.current.pop(slot).close(timeout=30)
        self._kill_all()  # a stray one (e.g. an aborted spawn)

    def _kill_all(self) -> None:
        for proc in self.all_processes:
            if proc.process is not None and proc.alive():
                proc.kill()


def run_rehearsal(plan: RehearsalPlan, progress: Callable[[str], None] | None = None) -> Observations:
    """Run the plan against the cluster and return what was observed."""
    return Rehearsal(plan, progress).run()
