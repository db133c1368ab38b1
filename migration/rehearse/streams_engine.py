"""The Streams rehearsal: N instances of a real Kafka Streams application (StreamsRehearsalApp)
run classic, then streams, then classic again; every instance stops between phases and the
rehearsal waits until the coordinator reports the group Empty before the next phase starts,
while a producer writes words and a probe samples the group and its committed offsets.

    observations = run_streams_rehearsal(plan)    # drives real processes; a misbehaving group
    report = analyse_streams(observations, plan)  # ends the run early, and the report says why
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .analysis import end_offsets
from .engine import RehearsalAborted, ensure_topic
from .member import MemberProcess
from .probe import GroupProbe, GroupSample
from .producer import WorkloadProducer
from .streams_jars import streams_app_command
from .streams_observations import InstanceLog, PhaseLog, StreamsObservations
from .streams_output import OutputReader
from .streams_plan import PHASES, StreamsRehearsalPlan, group_type_of

log = logging.getLogger("kcoord.rehearse")
CLOSE = {"leave": "close leave", "session": "close remain"}


class WordProducer(WorkloadProducer):
    """The input: the plan's words in turn, so every count is known from the deliveries."""

    def __init__(self, plan: StreamsRehearsalPlan) -> None:
        super().__init__(plan.bootstrap, plan.input_name, plan.run_id, plan.produce_rate)
        self.plan = plan

    def value(self, n: int) -> str:
        return self.plan.word(n)


def _tasks(proc: MemberProcess) -> set[str]:
    lines = proc.events("tasks")
    return set(lines[-1]["active"]) if lines else set()


def _failed(proc: MemberProcess) -> dict[str, Any] | None:
    fatal = proc.events("fatal") or proc.fatal_errors()
    if fatal:
        return fatal[-1]
    return None if proc.alive() else {"exit": proc.process.poll() if proc.process else None}


class StreamsRehearsal:
    def __init__(self, plan: StreamsRehearsalPlan, progress: Callable[[str], None] | None = None) -> None:
        self.plan = plan
        self.progress = progress or (lambda msg: log.info("%s", msg))
        self.current: list[MemberProcess] = []
        self.logs: list[tuple[int, MemberProcess]] = []
        self.probe: GroupProbe | None = None
        self.state_root = Path()

    def run(self) -> StreamsObservations:
        plan = self.plan
        partitions = ensure_topic(plan.bootstrap, plan.input_name, plan.partitions, plan.partitions)
        ensure_topic(plan.bootstrap, plan.output_name, 1, 1)
        self.plan.partitions = partitions
        self._argv("classic", 0)  # fetch and compile the application before the clock starts
        obs = StreamsObservations(
            plan={k: (str(v) if v is not None and not isinstance(v, (int, float, str, bool)) else v)
                  for k, v in dataclasses.asdict(plan).items()},
            group=plan.group, input_topic=plan.input_name, output_topic=plan.output_name,
            partitions=partitions, t0_ns=time.monotonic_ns(),
            started_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"))
        temporary = plan.state_dir is None
        self.state_root = plan.state_dir or Path(tempfile.mkdtemp(prefix="kcoord-rehearse-streams-"))
        self.progress(f"rehearse streams: {plan.instances} instances of {plan.group}, {' -> '.join(PHASES)}, "
                      f"{partitions} input partitions ({len(plan.tasks)} tasks), {plan.guarantee}, "
                      f"stop by {plan.stop}, "
                      f"via {plan.bootstrap}")
        self.probe = GroupProbe(plan.bootstrap, plan.group, plan.input_name, partitions,
                                plan.sample_interval_s).start()
        producer = WordProducer(plan)
        producer.start()
        output = OutputReader(plan.bootstrap, plan.output_name, read_committed=plan.exactly_once)
        try:
            for index, protocol in enumerate(PHASES):
                last = index == len(PHASES) - 1
                self._phase(obs, PhaseLog(index, protocol), producer if last else None, output)
        except RehearsalAborted as exc:
            obs.errors.append(str(exc))
            self.progress(f"ABORTED: {exc}")
        except BaseException:  # Ctrl-C or a bug: no report, but no process left behind
            self._kill_all()
            raise
        finally:
            self._kill_all()
            if obs.t_produce_stopped is None:
                obs.delivered = producer.stop()
                obs.t_produce_stopped = time.monotonic_ns()
            obs.producer_failures = list(producer.failed)
            obs.output_counts = output.read(10.0)
            obs.output_read = output.summary()
            output.close()
            self.probe.stop()
            obs.samples = self.probe.samples()
            obs.t_end = time.monotonic_ns()
            obs.instances = [InstanceLog(phase, p.slot, p.protocol, p.client_id, p.events()) for phase, p in self.logs]
            if temporary:
                shutil.rmtree(self.state_root, ignore_errors=True)
        return obs

    # --- one phase --------------------------------------------------------------------------

    def _phase(self, obs: StreamsObservations, phase: PhaseLog, producer: WordProducer | None,
               output: OutputReader) -> None:
        plan, probe = self.plan, self.probe
        assert probe is not None
        obs.phases.append(phase)
        phase.committed_at_start = probe.offsets.read()
        phase.t_start = time.monotonic_ns()
        self.current = [self._spawn(phase.index, slot, phase.protocol) for slot in range(plan.instances)]
        self._settle(f"phase {phase.index} ({phase.protocol})", phase)
        phase.t_settled = time.monotonic_ns()
        sample = probe.latest()
        self.progress(f"phase {phase.index}: {plan.instances} {phase.protocol} instances running every task; "
                      f"group {sample.view.group_type if sample else '?'} {sample.view.state if sample else ''}")
        time.sleep(plan.phase_s)
        if producer is not None:
            obs.delivered = producer.stop()
            obs.t_produce_stopped = time.monotonic_ns()
            self._drain(obs, output)
        phase.committed_at_stop = probe.offsets.read()
        phase.t_stop_requested = time.monotonic_ns()
        self._stop_all()
        phase.t_stopped = time.monotonic_ns()
        self._await_empty(phase)
        phase.committed_at_empty = probe.offsets.read()
        self.progress(f"phase {phase.index}: every instance stopped ({plan.stop}); group "
                      f"{group_type_of(phase.protocol)} Empty")  # type: ignore[arg-type]

    def _argv(self, protocol: str, slot: int) -> list[str]:
        plan = self.plan
        args = ["--bootstrap", plan.bootstrap, "--app-id", plan.group, "--input", plan.input_name,
                "--output", plan.output_name, "--state-dir", str(self.state_root / f"i{slot}"),
                "--protocol", protocol, "--guarantee", plan.guarantee, "--name", f"rehearse-i{slot}",
                "--commit-ms", str(plan.commit_interval_ms),
                "--session-timeout-ms", str(plan.classic_session_timeout_ms)]
        return streams_app_command(args, plan.java_cache)

    def _spawn(self, phase: int, slot: int, protocol: str) -> MemberProcess:
        client_id = f"rehearse-i{slot}"
        proc = MemberProcess(slot, phase, protocol, self._argv(protocol, slot), client_id)  # type: ignore[arg-type]
        self.logs.append((phase, proc))
        return proc.start()

    def settled(self, sample: GroupSample, protocol: str) -> bool:
        """Every instance RUNNING, every task active on exactly one of them, and the coordinator
        reports the group of the phase's type Stable with every instance in it."""
        owned = [_tasks(p) for p in self.current]
        if set().union(*owned) != self.plan.tasks or sum(map(len, owned)) != len(self.plan.tasks):
            return False
        if any((p.events("state") or [{}])[-1].get("state") != "RUNNING" for p in self.current):
            return False
        view = sample.view
        if view.group_type != group_type_of(protocol) or view.state.lower() != "stable":  # type: ignore[arg-type]
            return False
        if len(view.members) != len(self.current):
            return False
        return view.group_type != "streams" or (view.group_epoch == view.assignment_epoch and all(
            m.member_epoch == view.group_epoch for m in view.members))

    def _settle(self, what: str, phase: PhaseLog) -> None:
        assert self.probe is not None
        deadline = time.monotonic() + self.plan.settle_timeout_s
        while time.monotonic() < deadline:
            failed = [(p, f) for p in self.current if (f := _failed(p)) is not None]
            if failed:
                p, f = failed[0]
                raise RehearsalAborted(f"{what}: instance {p.client_id} failed: {f}; stderr tail:\n"
                                       f"{p.stderr_tail(15)}")
            if self.probe.wait_for(lambda s: self.settled(s, phase.protocol), 0.5, phase.t_start or 0) is not None:
                return
        latest = self.probe.latest()
        raise RehearsalAborted(f"{what}: not settled within {self.plan.settle_timeout_s}s; last view "
                               f"{latest.view if latest else None}; tasks "
                               f"{ {p.client_id: sorted(_tasks(p)) for p in self.current} }")

    def _drain(self, obs: StreamsObservations, output: OutputReader) -> None:
        """Until every delivered record was processed, its offset committed and the counts are out."""
        assert self.probe is not None
        expected: dict[str, int] = {}
        for d in obs.delivered:
            expected[d.value] = expected.get(d.value, 0) + 1
        end = end_offsets(obs.delivered)
        deadline = time.monotonic() + self.plan.drain_timeout_s
        while time.monotonic() < deadline:
            committed = self.probe.offsets.read() or {}
            if all(committed.get(p, -1) >= o for p, o in end.items()) and output.read() == expected:
                self.progress(f"drained: {len(obs.delivered)} records processed and committed, counts complete")
                return
            time.sleep(0.3)
        obs.errors.append(f"drain: not every record processed, committed and counted within "
                          f"{self.plan.drain_timeout_s}s")

    def _stop_all(self) -> None:
        command = CLOSE[self.plan.stop]
        with concurrent.futures.ThreadPoolExecutor(len(self.current)) as pool:
            list(pool.map(lambda p: p.close(timeout=45, command=command), self.current))
        self.current = []

    def _await_empty(self, phase: PhaseLog) -> None:
        """The coordinator reports the group Empty: at once after leaves, after the members'
        sessions with ``stop = session`` (Kafka's classic session, or the streams group's
        streams.session.timeout.ms, 45 s by default)."""
        assert self.probe is not None
        bound = self.plan.settle_timeout_s + (0 if self.plan.stop == "leave" else 60.0)
        gtype = group_type_of(phase.protocol)  # type: ignore[arg-type]
        got = self.probe.wait_for(lambda s: s.view.group_type == gtype and s.view.state.lower() == "empty",
                                  bound, phase.t_stopped or 0)
        if got is None:
            latest = self.probe.latest()
            raise RehearsalAborted(f"phase {phase.index}: group not Empty within {bound:.0f}s of every instance "
                                   f"stopping; last view {latest.view if latest else None}")
        phase.t_empty = got.t_ns

    def _kill_all(self) -> None:
        for _, proc in self.logs:
            if proc.process is not None and proc.alive():
                proc.kill()


def run_streams_rehearsal(plan: StreamsRehearsalPlan,
                          progress: Callable[[str], None] | None = None) -> StreamsObservations:
    """Run the plan against the cluster and return what was observed."""
    return StreamsRehearsal(plan, progress).run()

