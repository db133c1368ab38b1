"""The report computed from observations: losses, duplicates, conversions, offsets, timelines."""
from __future__ import annotations

import dataclasses
import json

from migration.rehearse import analyse, exit_code, summary_lines
from migration.rehearse.analysis import member_segments, observed_conversions, offset_decreases, regressions

from .scenario import RUN, ev, ns, sample, upgrade_of_two, view


def test_clean_upgrade_passes_with_one_conversion_at_the_first_consumer_join() -> None:
    p, obs = upgrade_of_two()
    obs.members[3].events.append({"t": ns(19.5), "event": "record", "topic": "t", "partition": 1, "offset": 2,
                                  "value": f"{RUN}-0000005"})
    report = analyse(obs, p)
    assert json.loads(json.dumps(report)) == report  # JSON as it stands
    assert report["records"]["produced"] == 6 and report["records"]["lost"] == 0
    assert report["records"]["duplicates"] == 1  # value 3 was delivered twice to m0.1
    [c] = report["conversions"]
    assert (c["from"], c["to"], c["observed_between_s"], c["during_step"]) == ("classic", "consumer", [9.8, 10.3], 0)
    assert c["epoch_before"] is None and c["epoch_after"] == 2
    assert c["offsets_before"] == {"0": 5, "1": 5} and c["offsets_after"] == {"0": 8, "1": 7}
    assert c["offset_regressions"] == []
    assert report["type_changes"]["ok"] and report["type_changes"]["conversions"][0]["window_s"] == [10.1, 12.0]
    assert report["verdict"] == "pass" and exit_code(report) == 0
    assert any("duplicate" in w for w in report["warnings"])


def test_a_lost_record_fails_the_run() -> None:
    p, obs = upgrade_of_two()  # value 5 was produced and never consumed
    report = analyse(obs, p)
    assert report["records"]["lost"] == 1 and report["records"]["lost_examples"] == [f"{RUN}-0000005"]
    assert report["verdict"] == "fail" and exit_code(report) == 1
    assert "1 records produced but never consumed" in report["failures"]


def test_records_of_other_runs_are_not_counted() -> None:
    p, obs = upgrade_of_two()
    obs.members[0].events.append({"t": ns(4), "event": "record", "partition": 0, "offset": 9, "value": "old-1"})
    assert analyse(obs, p)["records"]["consumed_total"] == 6


def test_an_offset_lower_after_the_conversion_is_a_regression() -> None:
    p, obs = upgrade_of_two()
    obs.samples[4] = dataclasses.replace(obs.samples[4], offsets={0: 8, 1: 4})  # p1: 5 before, 4 after
    report = analyse(obs, p)
    [c] = report["conversions"]
    assert c["offset_regressions"] == [{"partition": 1, "before": 5, "after": 4}]
    assert any("partition 1 committed offset 5 before, 4 after" in f for f in report["failures"])
    assert any("went down" in f for f in report["failures"])  # also seen as a decrease over time
    assert exit_code(report) == 1


def test_regressions_count_a_vanished_offset() -> None:
    assert regressions({0: 3, 1: 4}, {0: 3}) == [{"partition": 1, "before": 4, "after": -1}]
    assert regressions(None, {0: 1}) == []


def test_offset_decreases_anywhere_are_listed() -> None:
    samples = [sample(1, view("classic"), {0: 5}), sample(2, view("classic"), None), sample(3, view("classic"), {0: 4})]
    assert offset_decreases(samples, ns(0)) == [{"partition": 0, "before": 5, "after": 4, "at_s": 3.0}]


def test_probe_errors_and_unlisted_samples_do_not_make_conversions() -> None:
    err = dataclasses.replace(view(""), error="OSError: refused")
    samples = [sample(1, view("classic"), {}), sample(2, err, None), sample(3, view(""), {}),
               sample(4, view("classic"), {}), sample(5, view("consumer", epoch=3), {})]
    [c] = observed_conversions(samples)
    assert (c["from"], c["to"], c["last_old"].t_ns, c["first_new"].t_ns) == ("classic", "consumer", ns(4), ns(5))


def test_a_conversion_outside_kafkas_trigger_window_is_flagged() -> None:
    p, obs = upgrade_of_two()
    # The group turns consumer while only classic members exist (before m0's consumer incarnation started).
    obs.samples[2] = dataclasses.replace(obs.samples[2], view=view("consumer", epoch=1))
    obs.samples.insert(2, sample(8.0, view("classic"), {0: 5, 1: 5}))
    report = analyse(obs, p)
    check = report["type_changes"]
    assert not check["ok"] and check["conversions"][0]["as_expected"] is False
    assert any("differ from Kafka's triggers" in w for w in report["warnings"])


def test_a_missing_conversion_is_flagged() -> None:
    p, obs = upgrade_of_two()
    obs.samples = [s for s in obs.samples if s.view.group_type == "classic"]
    check = analyse(obs, p)["type_changes"]
    assert (check["expected"], check["observed"], check["ok"]) == (1, 0, False)


def test_member_segments_follow_the_process_view() -> None:
    _, obs = upgrade_of_two()
    segs = member_segments(obs.members[0], obs.t0_ns, obs.t_end)
    assert [(s["from"], s["to"], s["state"], s["partitions"]) for s in segs] == [
        (0.0, 2.0, "joining", []), (2.0, 9.0, "consuming", [0]), (9.0, 9.5, "leaving", [0]),
        (9.5, 10.0, "leaving", [])]


def test_a_member_that_lost_its_partitions_is_rebalancing_until_reassigned() -> None:
    _, obs = upgrade_of_two()
    m = obs.members[1]
    m.events[3:3] = [ev(6, "revoked", partitions=[["t", 1]]), ev(7, "assigned", partitions=[["t", 0], ["t", 1]])]
    states = [(s["from"], s["state"], s["partitions"]) for s in member_segments(m, obs.t0_ns, obs.t_end)]
    assert states[:4] == [(0.0, "joining", []), (2.0, "consuming", [1]), (6.0, "rebalancing", []),
                          (7.0, "consuming", [0, 1])]


def test_member_rows_carry_the_coordinator_view_by_client_id() -> None:
    p, obs = upgrade_of_two()
    report = analyse(obs, p)
    m1 = next(m for m in report["members"] if m["client_id"] == "rehearse-m1.0")
    assert [(v["t"], v["in_group"], v.get("protocol")) for v in m1["coordinator"]][:3] == [
        (1.0, True, "classic"), (10.3, True, "classic"), (12.5, False, None)]


def test_group_timeline_keeps_change_points_only() -> None:
    p, obs = upgrade_of_two()
    obs.samples.insert(2, sample(5.0, obs.samples[1].view, {0: 3, 1: 3}))  # no change
    timeline = analyse(obs, p)["group_timeline"]
    assert [(x["t"], x["type"], x["state"], x["group_epoch"]) for x in timeline] == [
        (1.0, "classic", "PreparingRebalance", None), (3.0, "classic", "Stable", None),
        (9.8, "classic", "PreparingRebalance", None), (10.3, "consumer", "Stable", 2),
        (12.5, "consumer", "Stable", 3), (19.0, "consumer", "Stable", 5)]


def test_throughput_buckets_produced_and_consumed() -> None:
    p, obs = upgrade_of_two()
    tp = analyse(obs, p)["throughput"]
    assert tp["bucket_s"] == 1.0 and len(tp["consumed"]) == 21
    assert sum(tp["produced"]) == 6 and sum(tp["consumed"]) == 6 and tp["consumed"][13] == 2


def test_summary_names_the_verdict_records_and_conversions() -> None:
    p, obs = upgrade_of_two()
    lines = summary_lines(analyse(obs, p))
    assert lines[0].startswith("FAIL: upgrade of 2 rdkafka members")
    assert "6 produced, 5 consumed, 1 duplicates, 1 lost" in lines[1]
    assert any(line.startswith("group type classic -> consumer at 9.8-10.3s (epoch None -> 2)") for line in lines)


def test_a_delivery_reported_without_an_offset_says_nothing_about_the_end():
    """librdkafka's idempotent producer reports a retried record the broker already wrote
    (a duplicate sequence) as delivered with no offset; the drain once failed on `None + 1`."""
    from migration.rehearse.analysis import end_offsets
    from migration.rehearse.producer import Delivered

    delivered = [Delivered("a", 0, 4, 1), Delivered("b", 0, None, 2), Delivered("c", 1, 0, 3)]
    assert end_offsets(delivered) == {0: 5, 1: 1}
