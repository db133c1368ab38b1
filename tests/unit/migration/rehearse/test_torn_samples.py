"""What the probe records across a conversion, as both rehearsals' analyses read it: a sample
retaken as the new type, or one still torn after every attempt (no type, an error), leaves the
conversion and its checks as in a run without the race, in the consumer rehearsal
(classic -> consumer) as in the Streams one (classic -> streams)."""
from __future__ import annotations

from migration.rehearse import analyse
from migration.rehearse.analysis import observed_conversions
from migration.rehearse.group_admin import DESCRIBE_ATTEMPTS, GroupView
from migration.rehearse.probe import GroupSample
from migration.rehearse.streams_analysis import type_changes

from .scenario import RUN, ns, sample, upgrade_of_two, view
from .test_group_admin_probe import StubCoordinator
from .test_group_admin_probe import sample as probe
from .test_streams_rehearsal import _report, _view, clean


def _torn_view(old: str, new: str) -> GroupView:
    """The probe's sample of a group converted between its two requests on every attempt."""
    flips = {2 * i + 2: (new, "Assigning") if i % 2 == 0 else (old, "Empty") for i in range(DESCRIBE_ATTEMPTS)}
    view = probe(StubCoordinator((old, "Empty"), flips))
    assert view.torn and view.error
    return view


def _passing_upgrade():
    p, obs = upgrade_of_two()
    obs.members[3].events.append({"t": ns(19.5), "event": "record", "topic": "t", "partition": 1, "offset": 2,
                                  "value": f"{RUN}-0000005"})
    return p, obs


def test_the_consumer_rehearsal_sees_one_conversion_from_the_last_classic_sample_across_a_torn_one():
    p, obs = _passing_upgrade()
    clean_report = analyse(obs, p)
    obs.samples.insert(3, sample(10.2, _torn_view("classic", "consumer"), {0: 6, 1: 6}))
    report = analyse(obs, p)
    assert report["verdict"] == "pass", report["failures"]
    assert report["conversions"] == clean_report["conversions"]
    [c] = report["conversions"]
    assert (c["from"], c["to"], c["observed_between_s"]) == ("classic", "consumer", [9.8, 10.3])
    assert c["members_before"] == 1  # the last classic sample's, not an empty "Dead" group's
    assert report["type_changes"]["ok"]
    assert (report["probe"]["errors"], report["probe"]["torn"]) == (1, 1)
    assert clean_report["probe"]["torn"] == 0
    # A warning, not a failure: a state of the group may have gone unseen.
    assert [w for w in report["warnings"] if w not in clean_report["warnings"]] == [
        f"1 of {len(obs.samples)} probe samples had an error (1 torn by the group's listing moving on every "
        "attempt) and were left out of the checks (see probe)"]
    assert not any("probe samples" in w for w in clean_report["warnings"])
    assert [x["type"] for x in report["group_timeline"]].count("classic") == 3  # no "classic Dead" point


def test_the_consumer_rehearsal_with_the_retaken_sample_at_the_conversion_passes():
    # The probe retook the sample after the conversion: it reads consumer, like the next one.
    p, obs = _passing_upgrade()
    retaken = probe(StubCoordinator(("classic", "Stable"), {2: ("consumer", "Reconciling")}))
    obs.samples.insert(3, sample(10.2, retaken, {0: 6, 1: 6}))
    report = analyse(obs, p)
    assert report["verdict"] == "pass" and report["type_changes"]["ok"]
    [c] = report["conversions"]
    assert c["observed_between_s"] == [9.8, 10.2] and c["during_step"] == 0


def test_the_streams_rehearsal_leaves_a_torn_sample_out_of_the_conversion():
    obs = clean()
    obs.samples = sorted(obs.samples + [GroupSample(ns(11.9), _view("classic", "Empty"), {0: 4}),
                                        GroupSample(ns(12.1), _torn_view("classic", "streams"), {0: 4})],
                         key=lambda s: s.t_ns)
    report = _report(obs)
    assert report["verdict"] == "pass", report["failures"]
    tc = report["type_changes"]
    # Not a "classic Dead": a sample of no type, left out and listed as the probe's torn one.
    assert tc["ok"] and tc["torn_samples"] == [12.1]
    assert [(e["from_empty"], e["states_before"]) for e in tc["expected"]] == [(True, ["Empty"]), (True, ["Empty"])]
    assert (report["probe"]["errors"], report["probe"]["torn"]) == (1, 1)
    assert len(report["warnings"]) == 1 and "(1 torn by the group's listing" in report["warnings"][0]
    assert type_changes(obs)["observed"] == tc["observed"]


def test_the_streams_rehearsal_with_the_retaken_sample_at_the_conversion_passes():
    obs = clean()
    retaken = probe(StubCoordinator(("classic", "Empty"), {2: ("streams", "Assigning")}))
    obs.samples = sorted(obs.samples + [GroupSample(ns(11.9), _view("classic", "Empty"), {0: 4}),
                                        GroupSample(ns(12.1), retaken, {0: 4})], key=lambda s: s.t_ns)
    report = _report(obs)
    assert report["verdict"] == "pass", report["failures"]
    tc = report["type_changes"]
    assert tc["ok"] and tc["torn_samples"] == [] and tc["observed"][0]["observed_between_s"] == [11.9, 12.1]
    assert report["warnings"] == [] and report["probe"]["torn"] == 0


def test_a_dead_classic_group_is_still_a_classic_sample():
    # Listed Dead and described Dead: the probe keeps it, and the analyses see a classic sample.
    dead = probe(StubCoordinator(("classic", "Dead")))
    assert (dead.group_type, dead.state, dead.error) == ("classic", "Dead", None)
    samples = [sample(1, view("consumer", epoch=2), {}), sample(2, dead, {}), sample(3, view("classic"), {})]
    assert [(c["from"], c["to"]) for c in observed_conversions(samples)] == [("consumer", "classic")]
    assert observed_conversions(samples)[0]["last_old"].t_ns == ns(1)
