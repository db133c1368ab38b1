"""The Streams rehearsal's plan and analysis on hand-built observations (no processes): a clean
classic -> streams -> classic run passes, and each kind of misbehaviour fails it by name."""
from __future__ import annotations

import dataclasses

import pytest

from migration.cli import register
from migration.rehearse.group_admin import GroupView, MemberView
from migration.rehearse.probe import GroupSample
from migration.rehearse.producer import Delivered
from migration.rehearse.streams import streams_summary_lines
from migration.rehearse.streams_analysis import analyse_streams, held_intervals
from migration.rehearse.streams_html import render_streams_html
from migration.rehearse.streams_observations import InstanceLog, PhaseLog, StreamsObservations
from migration.rehearse.streams_plan import PHASES, StreamsRehearsalPlan, expected_phases

from .scenario import T0, ns

PLAN = StreamsRehearsalPlan("127.0.0.1:29700", instances=1, partitions=1, words=2, app_id="app", run_id="r1")
TASKS = ["0_0", "1_0"]


def active(t: float, phase: str, task: str) -> dict:
    """An "active" line (StreamsEvents.ActiveLife) at ``t`` seconds."""
    return {"t": ns(t), "event": "active", "phase": phase, "task": task}


def _phase_window(i: int) -> tuple[float, float]:
    """Phase i runs from 10 i + 1 to 10 i + 6 seconds; its group is Empty at 10 i + 7."""
    return 10 * i + 1, 10 * i + 6


def _instance(phase: int, protocol: str, offsets: range) -> InstanceLog:
    start, stop = _phase_window(phase)
    events = [{"t": ns(start), "event": "spawned"}]
    events += [active(start + 0.9, "open", task) for task in TASKS]
    events += [{"t": ns(start + 1), "event": "state", "state": "RUNNING"},
               {"t": ns(start + 1), "event": "tasks", "active": TASKS, "prev_t": ns(start + 0.9)}]
    events += [{"t": ns(start + 2), "event": "input", "partition": 0, "offset": o} for o in offsets]
    events += [active(stop - 0.05, "close", task) for task in TASKS]
    events += [{"t": ns(stop), "event": "tasks", "active": [], "prev_t": ns(stop - 0.1)},
               {"t": ns(stop + 0.1), "event": "exited"}]
    return InstanceLog(phase, 0, protocol, "rehearse-i0", events)


def _view(gtype: str, state: str, tasks: tuple[str, ...] = ()) -> GroupView:
    members = (MemberView("m", "rehearse-i0", gtype, 1, (0,), tasks),) if state == "Stable" else ()
    return GroupView(gtype, state, 1, 1, members)


def clean() -> StreamsObservations:
    """Phase 0 processes 0-3, phase 1 4-7, phase 2 8-9; committed offsets 4, 8, 10."""
    obs = StreamsObservations(plan={}, group="app", input_topic="in", output_topic="out", partitions=1, t0_ns=T0,
                              started_at="2026-11-29T20:00:00+00:00")
    committed = [4, 8, 10]
    ranges = [range(0, 4), range(4, 8), range(8, 10)]
    for i, protocol in enumerate(PHASES):
        start, stop = _phase_window(i)
        gtype = "classic" if protocol == "classic" else "streams"
        obs.phases.append(PhaseLog(i, protocol, ns(start), ns(start + 1.5), ns(stop - 0.5), ns(stop + 0.2),
                                   ns(stop + 1), {0: committed[i - 1]} if i else {}, {0: committed[i]},
                                   {0: committed[i]}))
        obs.instances.append(_instance(i, protocol, ranges[i]))
        joining = "PreparingRebalance" if gtype == "classic" else "Assigning"
        obs.samples += [GroupSample(ns(start + 1.2), GroupView(gtype, joining, 1, 1, ()),
                                    obs.phases[-1].committed_at_start),
                        GroupSample(ns(start + 1.6), _view(gtype, "Stable", tuple(TASKS) if i == 1 else ()),
                                    {0: committed[i - 1]} if i else {}),
                        GroupSample(ns(stop + 1), _view(gtype, "Empty"), {0: committed[i]})]
    obs.delivered = [Delivered(PLAN.word(n), 0, n, ns(1 + n)) for n in range(10)]
    obs.output_counts = {"w0": 5, "w1": 5}
    obs.t_end = ns(30)
    return obs


def _report(obs: StreamsObservations) -> dict:
    return analyse_streams(obs, PLAN)


def test_the_plan_checks_its_settings_and_names_its_tasks_and_phases():
    assert PLAN.tasks == frozenset(TASKS) and PLAN.group == "app" and PLAN.word(3) == "w1"
    assert StreamsRehearsalPlan("h:1", run_id="x").input_name == "kcoord-rehearse-x-in"
    for bad in ({"instances": 0}, {"partitions": 0}, {"stop": "kill"}, {"produce_rate": 0}, {"bootstrap": "nohost"},
                {"guarantee": "exactly_once"}):
        with pytest.raises(ValueError):
            StreamsRehearsalPlan(**({"bootstrap": "h:1"} | bad))  # type: ignore[arg-type]
    assert [(e["protocol"], e["group_type"]) for e in expected_phases()] == [
        ("classic", "classic"), ("streams", "streams"), ("classic", "classic")]


def test_a_clean_round_trip_passes():
    report = _report(clean())
    assert report["verdict"] == "pass", report["failures"]
    assert [p["ok"] for p in report["phases"]] == [True, True, True]
    assert [p["states_while_starting"] for p in report["phases"]] == [
        ["classic PreparingRebalance"], ["streams Assigning"], ["classic PreparingRebalance"]]
    assert [(r["phase"], r["committed"], r["resumed_at"], r["ok"]) for r in report["resumptions"]] == [
        (1, 4, 4, True), (2, 8, 8, True)]
    assert [(c["from"], c["to"], c["state_before"]) for c in report["type_changes"]["observed"]] == [
        ("classic", "streams", "Empty"), ("streams", "classic", "Empty")]
    assert report["counts"]["ok"] and report["input"]["never_processed"] == 0 and report["active_twice"] == []
    assert streams_summary_lines(report)[0].startswith("PASS: streams rehearsal classic -> streams -> classic")
    page = render_streams_html(report)
    assert "<svg" in page and "classic → streams" in page and "PASS" in page


def test_exactly_once_is_stated_and_its_reprocessing_after_an_abort_is_a_warning():
    obs = clean()
    obs.instances[1].events.insert(5, {"t": ns(13), "event": "input", "partition": 0, "offset": 5})
    eos = dataclasses.replace(PLAN, guarantee="exactly_once_v2")
    report = analyse_streams(obs, eos)
    assert report["verdict"] == "pass", report["failures"]
    assert (report["run"]["guarantee"], report["run"]["output_isolation"]) == ("exactly_once_v2", "read_committed")
    assert report["warnings"] == ["1 input records processed twice within a phase "
                                  "(reprocessed after an aborted transaction)"]
    assert "exactly_once_v2, stop by leave" in streams_summary_lines(report)[0]
    assert "<b>exactly_once_v2</b>" in render_streams_html(report)
    plain = _report(obs)
    assert plain["run"]["guarantee"] == "at_least_once" and "(at-least-once redelivery)" in plain["warnings"][0]


def test_reprocessing_below_the_committed_offset_fails():
    obs = clean()
    obs.instances[1].events.insert(3, {"t": ns(13), "event": "input", "partition": 0, "offset": 2})
    report = _report(obs)
    assert any("reprocessed below the committed offset 4" in f for f in report["failures"])


def test_a_record_never_processed_and_a_wrong_count_fail():
    obs = clean()
    obs.instances[2].events = [e for e in obs.instances[2].events if e.get("offset") != 9]
    obs.output_counts = {"w0": 5, "w1": 4}
    failures = _report(obs)["failures"]
    assert "1 input records never processed" in failures
    assert "output counts wrong for 1 of 2 words (or not read)" in failures


def test_committed_offsets_changed_across_a_conversion_fail():
    obs = clean()
    obs.phases[1].committed_at_start = {0: 0}
    failures = _report(obs)["failures"]
    assert any(f.startswith("committed offsets changed between phase 0 and 1") for f in failures)


def test_a_task_active_on_two_instances_at_once_fails_but_a_handoff_does_not():
    obs = clean()
    other = dataclasses.replace(obs.instances[1], slot=1, client_id="rehearse-i1", events=[
        active(13, "open", "1_0"), active(14, "close", "1_0")])
    obs.instances.append(other)
    [twice] = _report(obs)["active_twice"]
    assert (twice["task"], twice["source"], twice["from_s"], twice["to_s"]) == ("1_0", "instances", 13.0, 14.0)
    assert any(f.startswith("task 1_0 active on two instances at once (each instance's own open and close")
               for f in _report(obs)["failures"])
    # Held by i0 from its open to its close; i1 opening after that is a handoff.
    assert held_intervals(obs.instances[1], obs.t_end or 0)[0] == ("0_0", ns(11.9), ns(15.95))
    other.events = [active(16, "open", "1_0"), {"t": ns(17), "event": "exited"}]
    assert _report(obs)["active_twice"] == []


def test_task_lines_that_lag_a_handoff_are_not_an_overlap():
    """Kafka 4.4 refreshes a thread's task metadata only when the thread enters RUNNING: the old
    owner's "tasks" lines still list a task it closed, after the new owner opened it."""
    obs = clean()
    old = obs.instances[1]
    old.events = [e for e in old.events if e["event"] != "tasks"] + [
        {"t": ns(12), "event": "tasks", "active": TASKS, "prev_t": ns(11.9)},
        {"t": ns(15.99), "event": "tasks", "active": [], "prev_t": ns(15.98)}]
    old.events.sort(key=lambda e: e["t"])
    obs.instances.append(dataclasses.replace(old, slot=1, client_id="rehearse-i1", events=[
        active(15.97, "open", "1_0"), {"t": ns(15.975), "event": "tasks", "active": ["1_0"], "prev_t": ns(15.9)},
        active(16, "close", "1_0"), {"t": ns(17), "event": "exited"}]))
    report = _report(obs)
    assert report["active_twice"] == [] and report["verdict"] == "pass", report["failures"]


def test_an_instance_that_ran_tasks_without_active_lines_fails():
    """Without its "active" lines an instance has no spans, and the check would pass blind."""
    obs = clean()
    obs.instances[1].events = [e for e in obs.instances[1].events if e["event"] != "active"]
    report = _report(obs)
    assert "instance rehearse-i0@phase1 ran active tasks but printed no \"active\" line: the check of tasks " \
        "active twice cannot see them" in report["failures"]
    assert report["instances"][1]["spans"] == []


def test_a_task_twice_in_one_describe_fails():
    obs = clean()
    two = (MemberView("a", "i0", "streams", 1, (0,), ("0_0",)), MemberView("b", "i1", "streams", 1, (0,), ("0_0",)))
    obs.samples.append(GroupSample(ns(13), GroupView("streams", "Reconciling", 2, 2, two), {0: 4}))
    obs.samples.sort(key=lambda s: s.t_ns)
    assert [t["source"] for t in _report(obs)["active_twice"]] == ["describe"]


def test_a_conversion_of_a_group_that_was_not_empty_or_a_wrong_type_fails():
    obs = clean()
    obs.samples = [s if s.view.group_type != "classic" or s.t_ns > ns(10) else
                   GroupSample(s.t_ns, _view("classic", "Stable"), s.offsets) for s in obs.samples]
    report = _report(obs)
    assert not report["type_changes"]["ok"] and report["verdict"] == "fail"
    obs = clean()
    obs.samples.insert(1, GroupSample(ns(3), _view("streams", "Stable"), {}))
    report = _report(obs)
    assert any("group type ['classic', 'streams'] while running" in f for f in report["failures"])


def test_the_cli_refuses_a_bad_streams_plan_before_running(capsys):
    import argparse
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["rehearse", "streams", "--bootstrap", "127.0.0.1:1", "--instances", "0"])
    assert args.func(args) == 2
    assert "instances must be >= 1" in capsys.readouterr().err
    args = parser.parse_args(["rehearse", "streams", "--bootstrap", "h:1", "--guarantee", "exactly_once_v2"])
    assert args.guarantee == "exactly_once_v2"
    assert parser.parse_args(["rehearse", "streams", "--bootstrap", "h:1"]).guarantee == "at_least_once"
    with pytest.raises(SystemExit):
        parser.parse_args(["rehearse", "streams", "--bootstrap", "h:1", "--guarantee", "exactly_once"])
