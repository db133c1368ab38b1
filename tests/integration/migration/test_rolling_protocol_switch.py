"""Rolling upgrade and downgrade with real clients through a real kcoord (issue 3 §3).

Five consumers of one group start with `classic`, are restarted one by one with
`consumer`, then one by one back with `classic`, while a producer keeps writing; once
with librdkafka, once with the Java 4.3 client. Each test runs the same engine as
`kcoord rehearse upgrade --and-back` and asserts on its report:
- every record is consumed;
- no committed offset is lower after a group type change than before it (nor ever);
- the group's type changes exactly when Kafka's would (reference §5): to `consumer` when
  the first consumer-protocol member joins, back to `classic` when the last one leaves,
  as seen through ListGroups / ConsumerGroupDescribe / DescribeGroups.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from migration.rehearse import RehearsalPlan, rehearse, write_report

MEMBERS = 5
PARTITIONS = 10
# Fast enough to fit the 90 s budget, slow enough that every member consumes in every
# configuration (each settled configuration runs dwell_s more; nothing here times it).
TIMINGS = dict(warmup_s=1.5, dwell_s=0.5, settle_timeout_s=30.0, drain_timeout_s=20.0, produce_rate=40.0,
               sample_interval_s=0.2, classic_session_timeout_ms=10_000, classic_heartbeat_interval_ms=500)


@pytest.fixture
def gateway(shared_gateway):
    return shared_gateway


def rolling_plan(bootstrap: str, names, client: str, **extra: Any) -> RehearsalPlan:
    return RehearsalPlan("upgrade", bootstrap, client=client, members=MEMBERS, partitions=PARTITIONS,
                         topic=names.topic(), group=names.group(), round_trip=True, **(TIMINGS | extra))


def run_and_keep(plan: RehearsalPlan, out: Path) -> dict[str, Any]:
    report = rehearse(plan)
    json_path, html_path = write_report(report, out)  # kept in tmp_path for a failing run's post-mortem
    print(f"rehearsal report: {json_path} {html_path}")
    return report


def assert_rolling_switch(report: dict[str, Any]) -> None:
    context = json.dumps({k: report[k] for k in ("failures", "warnings", "type_changes", "errors")}, indent=1)
    assert report["errors"] == [], context
    assert [s["to"] for s in report["steps"]] == ["consumer"] * MEMBERS + ["classic"] * MEMBERS, context

    # Every record consumed; the committed offsets reach the end.
    rec = report["records"]
    assert rec["produced"] >= 200, rec
    assert rec["lost"] == 0 and rec["consumed_unique"] == rec["produced"], rec
    assert report["offsets"]["behind_at_end"] == [], report["offsets"]

    # Committed offsets never lower after a conversion than before it, nor at any sample.
    assert len(report["conversions"]) == 2, context
    for c in report["conversions"]:
        assert c["offsets_before"] and c["offsets_after"], c
        assert c["offset_regressions"] == [], c
    assert report["offsets"]["decreases"] == [], report["offsets"]["decreases"]

    # The group type changes exactly at Kafka's triggers, once each way.
    up, down = report["conversions"]
    assert (up["from"], up["to"], up["during_step"]) == ("classic", "consumer", 0), up
    assert (down["from"], down["to"], down["during_step"]) == ("consumer", "classic", 2 * MEMBERS - 1), down
    assert report["type_changes"]["ok"], context
    # Upgrade: the classic generation becomes the group epoch, which only grows from then on.
    # A sample whose describe failed (the group converted between ListGroups and
    # ConsumerGroupDescribe: it carries the error and no epoch) says nothing about the epoch.
    consumer_epochs = [p["group_epoch"] for p in report["group_timeline"] if p["type"] == "consumer"
                       and "error" not in p]
    assert consumer_epochs and consumer_epochs == sorted(consumer_epochs) and consumer_epochs[0] >= 1
    assert up["members_after"] == MEMBERS and down["members_after"] == MEMBERS - 1

    # In the mixed group, ConsumerGroupDescribe tells each member's protocol (MemberType) as it joined.
    for m in report["members"]:
        seen = {v["protocol"] for v in m["coordinator"] if v["in_group"]}
        assert seen and seen <= {m["protocol"]}, (m["client_id"], m["protocol"], m["coordinator"])
    assert report["verdict"] == "pass", context


@pytest.mark.kafka_subset      # the use case: a classic group moved to KIP-848 in front of Kafka 3.9
@pytest.mark.timeout(150)
def test_rdkafka_rolling_upgrade_then_downgrade(gateway, names, tmp_path) -> None:
    report = run_and_keep(rolling_plan(gateway.bootstrap, names, "rdkafka"), tmp_path)
    assert_rolling_switch(report)


@pytest.mark.java
@pytest.mark.timeout(150)
def test_java_rolling_upgrade_then_downgrade(gateway, names, tmp_path, java_classes) -> None:
    from support.java import ensure_java_jars

    report = run_and_keep(rolling_plan(gateway.bootstrap, names, "java", java_cache=ensure_java_jars()), tmp_path)
    assert_rolling_switch(report)
    # The Java client reports its generation / member epoch with each assignment.
    assert all(m["generations"] for m in report["members"]), [m["generations"] for m in report["members"]]
