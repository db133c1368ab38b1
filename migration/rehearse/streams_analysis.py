"""StreamsObservations -> the Streams rehearsal's report (a JSON-able dict). Pure: no I/O, no clocks.

The verdict fails on any of:
- an input record never processed (a gap), or processed below the offset committed when the
  previous phase stopped (the committed offsets were not kept, or not used);
- a committed offset that went down at any time, or changed between one phase's end and the
  next phase's start (across a conversion);
- a final count on the output topic that is not the number of times the word was produced;
- a task active on two instances at once, from each task's own lifetime on each instance (its
  "active" open and close lines: StreamsEvents.ActiveLife, java/streams/StreamsEvents.java), or
  in two members' assignments in one StreamsGroupDescribe; an instance that ran active tasks
  but printed no "active" line (its tasks would be invisible to the check);
- a phase whose group the coordinator did not report of the phase's type and Stable, or not
  Empty after its instances stopped; a group type change other than Kafka's two conversions;
- an error of the run (a phase that did not settle, an instance that failed).
A record processed twice inside one phase is a warning: at-least-once redelivery, or under
exactly_once_v2 the reprocessing of an aborted transaction's records (the "input" lines are
printed on processing, before the transaction's outcome is known).
Under exactly_once_v2 the checks are the same; what differs is what they read: the output
counts are read read_committed (so an aborted transaction's counts must not show), and the
committed offsets are those of committed transactions (TxnOffsetCommit), which never go down.
All times are seconds since the rehearsal started (t0).

The spans are not made of the "tasks" lines: a stream thread's task metadata is refreshed only
when the thread enters RUNNING, so an old owner lists a revoked task after its new owner runs it.
task_spans and overlaps are also the test suite's overlap check (tests/support/streams_app.py),
so both judge a handover by one rule.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from itertools import combinations
from typing import Any, NamedTuple

from .analysis import EXAMPLES, _offsets, _s, group_timeline, offset_decreases, probe_warnings
from .probe import GroupSample
from .streams_observations import InstanceLog, PhaseLog, StreamsObservations
from .streams_plan import STOP_WHY, StreamsRehearsalPlan, expected_phases, group_type_of

REPORT_FORMAT = 1
# What each "source" of active_twice measured, as the failures say it.
TWICE_SOURCE = {"instances": "each instance's own open and close of the task",
                "describe": "two members' assignments in one StreamsGroupDescribe"}


# ------------------------------------------------------------------------ input records
def processed_by_phase(obs: StreamsObservations) -> dict[int, Counter[tuple[int, int]]]:
    """(partition, offset) -> times processed, per phase."""
    out: dict[int, Counter[tuple[int, int]]] = defaultdict(Counter)
    for inst in obs.instances:
        for e in inst.events:
            if e["event"] == "input":
                out[inst.phase][(int(e["partition"]), int(e["offset"]))] += 1
    return out


def input_accounting(obs: StreamsObservations) -> dict[str, Any]:
    by_phase = processed_by_phase(obs)
    total: Counter[tuple[int, int]] = Counter()
    for c in by_phase.values():
        total.update(c)
    delivered = {(d.partition, d.offset) for d in obs.delivered if d.offset is not None}
    gaps = sorted(delivered - total.keys())
    within = sorted(k for c in by_phase.values() for k, n in c.items() if n > 1)
    return {"produced": len(delivered), "processed_unique": len(delivered & total.keys()),
            "processed_total": sum(total.values()), "never_processed": len(gaps),
            "never_processed_examples": [list(g) for g in gaps[:EXAMPLES]],
            "processed_twice_in_a_phase": len(within),
            "processed_twice_examples": [list(k) for k in within[:EXAMPLES]],
            "producer_failures": len(obs.producer_failures)}


def resumptions(obs: StreamsObservations) -> list[dict[str, Any]]:
    """Per phase after the first and per partition: where processing resumed against the offset
    committed when the previous phase's group was Empty; below it is reprocessing."""
    by_phase = processed_by_phase(obs)
    out = []
    for prev, phase in zip(obs.phases, obs.phases[1:]):
        committed = prev.committed_at_empty or {}
        done_before = {k for k in by_phase.get(prev.index, Counter())}
        for p in range(obs.partitions):
            offsets = sorted(o for (pp, o) in by_phase.get(phase.index, Counter()) if pp == p)
            if not offsets:
                continue
            at = committed.get(p)
            below = [o for o in offsets if at is not None and o < at]
            again = [o for o in offsets if (p, o) in done_before and (at is None or o >= at)]
            out.append({"phase": phase.index, "partition": p, "committed": at, "resumed_at": offsets[0],
                        "reprocessed_below_committed": len(below),
                        "processed_again_uncommitted": len(again),
                        "ok": not below and (at is None or offsets[0] == at)})
    return out


def count_check(obs: StreamsObservations) -> dict[str, Any]:
    expected = Counter(d.value for d in obs.delivered)
    got = obs.output_counts or {}
    wrong = sorted(w for w in set(expected) | set(got) if got.get(w, 0) != expected.get(w, 0))
    return {"words": len(expected), "expected_total": sum(expected.values()), "ok": obs.output_counts is not None
            and not wrong, "wrong": [{"word": w, "expected": expected.get(w, 0), "counted": got.get(w)}
                                     for w in wrong[:EXAMPLES]], "wrong_words": len(wrong)}


# ------------------------------------------------------------------------------- tasks
Span = tuple[str, int, int]   # (task, from, to), CLOCK_MONOTONIC ns


def task_spans(events: Iterable[dict[str, Any]], end: int) -> list[Span]:
    """(task, open, close) for each "active" open/close pair in ``events``; a task still open
    at the last event is held until ``end``. A task may open again after it closed (a revoked
    task resumed), which starts a new span; other lines are ignored."""
    spans: list[Span] = []
    since: dict[str, int] = {}
    for event in events:
        if event["event"] != "active":
            continue
        task, t = event["task"], int(event["t"])
        if event["phase"] == "open":
            since.setdefault(task, t)
        elif task in since:
            spans.append((task, since.pop(task), t))
    return spans + [(task, start, end) for task, start in since.items()]


class Overlap(NamedTuple):
    """Two instances' spans of one task that share an instant."""

    task: str
    first: str
    first_span: tuple[int, int]
    second: str
    second_span: tuple[int, int]

    @property
    def shared(self) -> tuple[int, int]:
        """The instants both spans hold."""
        return max(self.first_span[0], self.second_span[0]), min(self.first_span[1], self.second_span[1])

    def __str__(self) -> str:
        (s1, e1), (s2, e2) = self.first_span, self.second_span
        return f"task {self.task}: {self.first} [{s1}, {e1}] and {self.second} [{s2}, {e2}]"


def overlapping(instances: Iterable[tuple[str, list[Span]]]) -> list[Overlap]:
    """Every pair of spans of one task on two instances (two entries of ``instances``, named
    alike or not: a restart is another process) that share an instant."""
    by_task: dict[str, list[tuple[int, int, int, str]]] = defaultdict(list)
    for index, (name, spans) in enumerate(instances):
        for task, start, end in spans:
            by_task[task].append((start, end, index, name))
    return [Overlap(task, a1, (s1, e1), a2, (s2, e2))
            for task, held in sorted(by_task.items())
            for (s1, e1, i1, a1), (s2, e2, i2, a2) in combinations(sorted(held), 2)
            if i1 != i2 and s2 <= e1 and s1 <= e2]


def overlaps(instances: Iterable[tuple[str, list[Span]]]) -> list[str]:
    """overlapping(), each pair said in one line."""
    return [str(o) for o in overlapping(instances)]


def held_intervals(inst: InstanceLog, t_end: int) -> list[Span]:
    """(task, from, to): the spans in which the instance surely held the task as active; one
    still open ends at the instance's "exited" or "closed" line, else at the run's end."""
    end = max((int(e["t"]) for e in inst.events if e["event"] in ("exited", "closed")), default=t_end)
    return task_spans(inst.events, end)


def _name(inst: InstanceLog) -> str:
    return f"{inst.client_id}@phase{inst.phase}"


def silent_instances(obs: StreamsObservations) -> list[str]:
    """Instances whose "tasks" lines show active tasks but that printed no "active" line: the
    overlap check would see no span of theirs."""
    return [_name(i) for i in obs.instances
            if any(e["event"] == "tasks" and e["active"] for e in i.events)
            and not any(e["event"] == "active" for e in i.events)]


def active_twice(obs: StreamsObservations) -> list[dict[str, Any]]:
    """Tasks active on two instances at once ("source": "instances", from each instance's own
    open and close of the task) or in two members' assignments of one describe ("describe")."""
    t0, t_end = obs.t0_ns, obs.t_end or obs.t0_ns
    found = [{"task": o.task, "instances": [o.first, o.second], "from_s": _s(o.shared[0], t0),
              "to_s": _s(o.shared[1], t0), "source": "instances"}
             for o in overlapping((_name(i), held_intervals(i, t_end)) for i in obs.instances)]
    for s in obs.samples:
        tasks = Counter(t for m in s.view.members for t in m.tasks)
        for task, n in sorted(tasks.items()):
            if n > 1:
                found.append({"task": task, "instances": [m.client_id for m in s.view.members if task in m.tasks],
                              "from_s": _s(s.t_ns, t0), "to_s": _s(s.t_ns, t0), "source": "describe"})
    return found


# ------------------------------------------------------------------------------- group
def typed_samples(samples: list[GroupSample]) -> tuple[list[GroupSample], list[GroupSample]]:
    """(the samples that say the group's type and state, the probe's torn ones): the first are
    neither failed nor unlisted; the second are those the probe gave up on (GroupView.torn: the
    listing moved between ListGroups and the describe on every attempt,
    group_admin.GroupAdmin._describe), which have an error and no type, so are never typed.

    A "classic Dead" with no error is the group's state. The probe takes a sample again when its
    describe says the group is not of the listed type (a conversion landed between the two
    requests, and DescribeGroups below v6 answers "Dead"), so what is left was listed Dead, or
    described Dead again under an unchanged listing. Either way the checks must see it: a
    coordinator that removed the classic group and created a streams one, instead of
    converting the empty group, shows as such a sample before the flip."""
    return ([s for s in samples if not s.view.error and s.view.group_type],
            [s for s in samples if s.view.torn])


def _samples_between(samples: list[GroupSample], lo: int | None, hi: int | None) -> list[GroupSample]:
    """``samples`` (typed ones) taken from ``lo`` to ``hi``."""
    return [s for s in samples if lo is not None and s.t_ns >= lo and (hi is None or s.t_ns <= hi)]


def phase_report(obs: StreamsObservations, phase: PhaseLog) -> dict[str, Any]:
    t0 = obs.t0_ns
    gtype = group_type_of(phase.protocol)  # type: ignore[arg-type]
    typed, _ = typed_samples(obs.samples)
    starting = _samples_between(typed, phase.t_start, phase.t_settled)
    running = _samples_between(typed, phase.t_settled, phase.t_stop_requested)
    types = sorted({s.view.group_type for s in running})
    states = sorted({s.view.state for s in running})
    problems = []
    if phase.t_settled is None:
        problems.append("never settled")
    elif types != [gtype]:
        problems.append(f"group type {types} while running, expected {gtype}")
    if phase.t_settled is not None and phase.t_empty is None:
        problems.append("the group was not reported Empty after every instance stopped")
    return {"phase": phase.index, "protocol": phase.protocol, "expected_group_type": gtype,
            "group_types_while_running": types, "states_while_running": states,
            "states_while_starting": [f"{s.view.group_type} {s.view.state}" for i, s in enumerate(starting)
                                      if i == 0 or (s.view.group_type, s.view.state) !=
                                      (starting[i - 1].view.group_type, starting[i - 1].view.state)],
            "start_s": _s(phase.t_start, t0), "settled_s": _s(phase.t_settled, t0),
            "settle_s": None if phase.t_settled is None or phase.t_start is None
            else round((phase.t_settled - phase.t_start) / 1e9, 3),
            "stop_requested_s": _s(phase.t_stop_requested, t0), "stopped_s": _s(phase.t_stopped, t0),
            "empty_s": _s(phase.t_empty, t0),
            "committed_at_start": _offsets(phase.committed_at_start),
            "committed_at_stop": _offsets(phase.committed_at_stop),
            "committed_at_empty": _offsets(phase.committed_at_empty),
            "ok": not problems, "problems": problems}


def type_changes(obs: StreamsObservations) -> dict[str, Any]:
    """Group type flips seen by the probe against Kafka's: one at the start of each phase after
    the first (the first heartbeat or JoinGroup of the new protocol to the empty group).

    Each expected flip must be seen between the previous phase's group being reported Empty and
    the phase settling, and every sample of the old type from that Empty report up to the flip
    must say Empty (``states_before``): nothing but the new protocol touched the group, and the
    conversion found it empty. No other flip may be seen. Samples with an error are left out;
    the probe's torn ones (typed_samples) are listed in ``torn_samples``: they hold no type."""
    t0 = obs.t0_ns
    typed, torn = typed_samples(obs.samples)
    seen: list[dict[str, Any]] = []
    for prev, s in zip(typed, typed[1:]):
        if s.view.group_type != prev.view.group_type:
            seen.append({"from": prev.view.group_type, "to": s.view.group_type,
                         "observed_between_s": [_s(prev.t_ns, t0), _s(s.t_ns, t0)],
                         "state_before": prev.view.state, "offsets_before": _offsets(prev.offsets),
                         "offsets_after": _offsets(s.offsets), "_t": (prev.t_ns, s.t_ns)})
    expected = []
    for prev_phase, phase in zip(obs.phases, obs.phases[1:]):
        want = (group_type_of(prev_phase.protocol), group_type_of(phase.protocol))  # type: ignore[arg-type]
        since = prev_phase.t_empty or phase.t_start
        got = next((c for c in seen if (c["from"], c["to"]) == want and since is not None
                    and c["_t"][1] >= since
                    and (phase.t_settled is None or c["_t"][0] <= phase.t_settled)), None)
        states = [] if got is None or since is None else sorted(
            {s.view.state for s in typed if since <= s.t_ns <= got["_t"][0]})
        expected.append({"phase": phase.index, "from": want[0], "to": want[1], "observed": got is not None,
                         "states_before": states,
                         "from_empty": bool(states) and all(st.lower() == "empty" for st in states)})
    for c in seen:
        del c["_t"]
    ok = len(seen) == len(expected) and all(e["observed"] and e["from_empty"] for e in expected)
    return {"ok": ok, "expected": expected, "observed": seen,
            "torn_samples": [_s(s.t_ns, t0) for s in torn]}


def offsets_across_phases(obs: StreamsObservations) -> list[dict[str, Any]]:
    """Committed offsets at one phase's end against the next phase's start: they must be equal."""
    out = []
    for prev, phase in zip(obs.phases, obs.phases[1:]):
        before, after = prev.committed_at_empty or {}, phase.committed_at_start or {}
        changed = [{"partition": p, "before": before.get(p), "after": after.get(p)}
                   for p in sorted(set(before) | set(after)) if before.get(p) != after.get(p)]
        out.append({"from_phase": prev.index, "to_phase": phase.index, "kept": not changed, "changed": changed})
    return out


# ------------------------------------------------------------------------------ report
def analyse_streams(obs: StreamsObservations, plan: StreamsRehearsalPlan) -> dict[str, Any]:
    t0 = obs.t0_ns
    inputs = input_accounting(obs)
    resumed = resumptions(obs)
    counts = count_check(obs)
    twice = active_twice(obs)
    phases = [phase_report(obs, p) for p in obs.phases]
    types = type_changes(obs)
    kept = offsets_across_phases(obs)
    decreases = offset_decreases(obs.samples, t0)
    failures = []
    if len(obs.phases) < len(expected_phases()):
        failures.append(f"only {len(obs.phases)} of {len(expected_phases())} phases ran")
    if inputs["never_processed"]:
        failures.append(f"{inputs['never_processed']} input records never processed")
    for r in resumed:
        if r["reprocessed_below_committed"]:
            failures.append(f"phase {r['phase']} partition {r['partition']}: {r['reprocessed_below_committed']} "
                            f"records reprocessed below the committed offset {r['committed']}")
        elif not r["ok"]:
            failures.append(f"phase {r['phase']} partition {r['partition']}: resumed at {r['resumed_at']}, "
                            f"committed {r['committed']}")
    failures += [f"committed offsets changed between phase {k['from_phase']} and {k['to_phase']}: {k['changed']}"
                 for k in kept if not k["kept"]]
    failures += [f"partition {d['partition']} committed offset went down {d['before']} -> {d['after']} at "
                 f"{d['at_s']}s" for d in decreases]
    if not counts["ok"]:
        failures.append(f"output counts wrong for {counts['wrong_words']} of {counts['words']} words "
                        f"(or not read)")
    failures += [f"task {t['task']} active on two instances at once ({TWICE_SOURCE[t['source']]}): "
                 f"{t['instances']} from {t['from_s']}s to {t['to_s']}s" for t in twice]
    failures += [f"instance {name} ran active tasks but printed no \"active\" line: the check of tasks active "
                 "twice cannot see them" for name in silent_instances(obs)]
    failures += [f"phase {p['phase']} ({p['protocol']}): {problem}" for p in phases for problem in p["problems"]]
    if not types["ok"]:
        failures.append("group type changes differ from Kafka's offline conversions (see type_changes)")
    failures += obs.errors
    warnings = []
    if inputs["processed_twice_in_a_phase"]:
        why = ("reprocessed after an aborted transaction" if plan.exactly_once else "at-least-once redelivery")
        warnings.append(f"{inputs['processed_twice_in_a_phase']} input records processed twice within a phase "
                        f"({why})")
    if inputs["producer_failures"]:
        warnings.append(f"{inputs['producer_failures']} records the producer could not deliver")
    if obs.output_read is not None and not obs.output_read["reached_end"]:
        warnings.append(f"the last read of the output topic ({obs.output_read['isolation']}) did not reach its end "
                        f"(offset {obs.output_read['end_offset']}) within its budget: the counts may be short")
    warnings += probe_warnings(obs.samples)
    probe_errors = [s for s in obs.samples if s.view.error]
    return {
        "format": REPORT_FORMAT, "kind": "streams",
        "verdict": "fail" if failures else "pass", "failures": failures, "warnings": warnings,
        "run": {"kind": "streams", "phases": [p.protocol for p in obs.phases], "instances": plan.instances,
                "stop": plan.stop, "stop_why": STOP_WHY[plan.stop], "guarantee": plan.guarantee,
                "output_isolation": (obs.output_read or {}).get(
                    "isolation", "read_committed" if plan.exactly_once else "read_uncommitted"),
                "group": obs.group, "input": obs.input_topic,
                "output": obs.output_topic,
                "partitions": obs.partitions, "tasks": len(plan.tasks), "bootstrap": plan.bootstrap,
                "run_id": plan.run_id, "started_at": obs.started_at, "duration_s": _s(obs.t_end, t0),
                "produce_stopped_s": _s(obs.t_produce_stopped, t0)},
        "plan": obs.plan,
        "expected": expected_phases(),
        "phases": phases,
        "input": inputs,
        "resumptions": resumed,
        "counts": counts,
        "output_read": obs.output_read,
        "active_twice": twice,
        "type_changes": types,
        "offsets": {"across_phases": kept, "decreases": decreases},
        "group_timeline": group_timeline(obs.samples, t0),
        "instances": [{"phase": i.phase, "slot": i.slot, "client_id": i.client_id, "protocol": i.protocol,
                       "inputs": sum(1 for e in i.events if e["event"] == "input"),
                       "states": [e["state"] for e in i.events if e["event"] == "state"],
                       "spans": [{"task": t, "from_s": _s(a, t0), "to_s": _s(b, t0)}
                                 for t, a, b in sorted(held_intervals(i, obs.t_end or t0))]}
                      for i in obs.instances],
        "probe": {"samples": len(obs.samples), "errors": len(probe_errors),
                  "torn": sum(1 for s in probe_errors if s.view.torn),
                  "error_examples": sorted({s.view.error for s in probe_errors if s.view.error})[:EXAMPLES]},
        "errors": list(obs.errors),
    }
