"""The Streams rehearsal's check of the group's type changes on hand-built samples: a sample
the probe gave up on as torn (the group converted between its ListGroups and its describe on
every attempt) holds no type, so a clean run with one still passes; a "classic Dead" with no
error is the group's state (the probe retakes the race's), so a conversion from a group seen
Dead, or rejoined since the previous phase, fails, and so does a flip more."""
from __future__ import annotations

from migration.rehearse.group_admin import GroupView
from migration.rehearse.probe import GroupSample
from migration.rehearse.streams_analysis import type_changes, typed_samples

from .scenario import ns
from .test_streams_rehearsal import _report, _view, clean

# In clean(): phase 0's group is Empty at 7 s, phase 1 starts at 11 s and its first streams
# sample is at 12.2 s; phase 1's group is Empty at 17 s and phase 2's first classic one at 22.2 s.


def _with(*samples: GroupSample):
    obs = clean()
    obs.samples = sorted(obs.samples + list(samples), key=lambda s: s.t_ns)
    return obs


def _torn(t: float) -> GroupSample:
    """What the probe records when a conversion lands between its ListGroups and its describe
    on every attempt (group_admin.GroupAdmin._describe): no type, an error, ``torn``."""
    error = ("the group's type changed between ListGroups and the describe 3 times: "
             "listed classic Empty, DescribeGroups Dead; ...")
    return GroupSample(ns(t), GroupView("", "", error=error, torn=True), {0: 4})


def _dead(t: float) -> GroupSample:
    """A classic group the probe saw Dead: listed Dead (or described Dead again under an
    unchanged listing), a state of the group."""
    return GroupSample(ns(t), GroupView("classic", "Dead"), {0: 4})


def test_a_torn_sample_at_the_conversion_is_not_the_old_groups_state():
    obs = _with(GroupSample(ns(11.9), _view("classic", "Empty"), {0: 4}), _torn(12.1))
    report = _report(obs)
    assert report["verdict"] == "pass", report["failures"]
    tc = report["type_changes"]
    assert tc["ok"] and tc["torn_samples"] == [12.1]
    assert [(e["from_empty"], e["states_before"]) for e in tc["expected"]] == [(True, ["Empty"]), (True, ["Empty"])]
    assert [c["state_before"] for c in tc["observed"]] == ["Empty", "Empty"]
    assert report["phases"][1]["states_while_starting"] == ["classic Empty", "streams Assigning"]
    assert (report["probe"]["errors"], report["probe"]["torn"]) == (1, 1)
    assert report["warnings"] == [f"1 of {len(obs.samples)} probe samples had an error (1 torn by the group's "
                                  "listing moving on every attempt) and were left out of the checks (see probe)"]
    # Two in a row (the group converted on every attempt twice) are left out alike.
    assert type_changes(_with(_torn(12.0), _torn(12.1)))["torn_samples"] == [12.0, 12.1]


def test_a_classic_group_seen_dead_before_the_flip_to_streams_fails():
    # A coordinator that removes the empty classic group and creates a streams group, instead
    # of converting it: the probe lists the classic group Dead between the two.
    obs = _with(GroupSample(ns(11.9), _view("classic", "Empty"), {0: 4}), _dead(12.0))
    report = _report(obs)
    tc = report["type_changes"]
    assert not tc["ok"] and report["verdict"] == "fail"
    assert (tc["expected"][0]["from_empty"], tc["expected"][0]["states_before"]) == (False, ["Dead", "Empty"])
    assert tc["observed"][0]["state_before"] == "Dead" and tc["torn_samples"] == []
    assert "group type changes differ from Kafka's offline conversions (see type_changes)" in report["failures"]
    assert report["warnings"] == []


def test_a_dead_classic_group_that_stays_classic_is_a_state_of_the_group():
    # Dead, and still listed classic afterwards: the conversion found the group not Empty.
    obs = _with(_dead(11.5), GroupSample(ns(11.9), _view("classic", "Empty"), {0: 4}))
    kept, torn = typed_samples(obs.samples)
    assert torn == [] and ns(11.5) in {s.t_ns for s in kept}
    tc = type_changes(obs)
    assert not tc["ok"] and tc["expected"][0]["states_before"] == ["Dead", "Empty"]


def test_a_conversion_of_a_group_rejoined_since_it_was_empty_fails():
    # The old group went Stable again after the previous phase emptied it and before the
    # conversion, though its last sample before the conversion is Empty again.
    obs = _with(GroupSample(ns(9), _view("classic", "Stable"), {0: 4}),
                GroupSample(ns(11.9), _view("classic", "Empty"), {0: 4}))
    report = _report(obs)
    tc = report["type_changes"]
    assert not tc["ok"] and report["verdict"] == "fail"
    assert (tc["expected"][0]["from_empty"], tc["expected"][0]["states_before"]) == (False, ["Empty", "Stable"])
    assert tc["observed"][0]["state_before"] == "Empty"
    assert "group type changes differ from Kafka's offline conversions (see type_changes)" in report["failures"]


def test_a_flip_more_than_kafkas_conversions_fails_even_across_a_torn_sample():
    # streams, back to classic, streams again while phase 1 starts: three flips, two expected.
    obs = _with(GroupSample(ns(11.5), _view("streams", "Assigning"), {0: 4}),
                GroupSample(ns(11.8), _view("classic", "Empty"), {0: 4}), _torn(12.0))
    tc = type_changes(obs)
    assert not tc["ok"] and len(tc["observed"]) == 4 and tc["torn_samples"] == [12.0]
    assert [(c["from"], c["to"]) for c in tc["observed"]] == [
        ("classic", "streams"), ("streams", "classic"), ("classic", "streams"), ("streams", "classic")]
    # A conversion never seen fails too: phase 2's classic samples described as streams.
    obs = clean()
    obs.samples = [s if s.t_ns < ns(20) else GroupSample(s.t_ns, _view("streams", s.view.state), s.offsets)
                   for s in obs.samples]
    tc = type_changes(obs)
    assert not tc["ok"] and tc["expected"][1]["observed"] is False
