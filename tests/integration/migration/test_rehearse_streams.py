"""`kcoord rehearse streams` end to end through kcoord in front of Kafka 4.4: two instances of
the rehearsal's own Kafka Streams 4.4 application (migration/rehearse/java/streams/) move
classic -> streams -> classic, every instance stopped (leaving) between phases, and the
report's verdicts are the run's: the group's type and state per phase as kcoord reports them,
Kafka's two offline conversions, committed offsets kept, no reprocessing, counts complete and
correct, no task active twice."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from migration.rehearse.streams import StreamsRehearsalPlan, rehearse_streams, write_streams_report
from support.java import ensure_java_jars
from support.kcoord import KcoordProcess, serving
from support.names import unique_name
from support.streams_deployment import KCOORD_CONFIG

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.timeout(150)]
# The classic phases' first generation forms 500 ms after the first JoinGroup, not Kafka's 3 s.
CONFIG = (*KCOORD_CONFIG, "group_initial_rebalance_delay_ms=500")


@pytest.fixture(scope="module")
def gateway(kafka44) -> Iterator[KcoordProcess]:
    yield from serving(KcoordProcess(upstream=kafka44.bootstrap, state_topic=unique_name("__kcoord_rehearse_streams"),
                                     config=CONFIG))


def test_classic_streams_classic_keeps_offsets_and_counts(gateway, tmp_path) -> None:
    plan = StreamsRehearsalPlan(gateway.bootstrap, instances=2, partitions=2, produce_rate=40, phase_s=1.0,
                                settle_timeout_s=45, drain_timeout_s=30, state_dir=tmp_path / "state",
                                java_cache=ensure_java_jars(), run_id=unique_name("rs")[-8:])
    report = rehearse_streams(plan, progress=print)
    json_path, html_path = write_streams_report(report, tmp_path, "run")
    assert json.loads(json_path.read_text())["verdict"] == report["verdict"]
    assert report["verdict"] == "pass", (report["failures"], report["phases"])
    assert [(p["protocol"], p["group_types_while_running"], p["ok"]) for p in report["phases"]] == [
        ("classic", ["classic"], True), ("streams", ["streams"], True), ("classic", ["classic"], True)]
    assert [(e["from"], e["to"], e["observed"], e["from_empty"]) for e in report["type_changes"]["expected"]] == [
        ("classic", "streams", True, True), ("streams", "classic", True, True)]
    assert all(k["kept"] for k in report["offsets"]["across_phases"])
    assert report["input"]["produced"] > 0 and report["input"]["never_processed"] == 0
    assert report["resumptions"] and all(r["ok"] for r in report["resumptions"])
    assert report["counts"]["ok"] and report["active_twice"] == []
    assert "<svg" in html_path.read_text() and "classic → streams" in html_path.read_text()
