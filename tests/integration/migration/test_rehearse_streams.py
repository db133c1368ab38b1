"""`kcoord rehearse streams` end to end through kcoord in front of Kafka 4.4: two instances of
the rehearsal's own Kafka Streams 4.4 application (migration/rehearse/java/streams/) move
classic -> streams -> classic, every instance stopped (leaving) between phases, and the
report's verdicts are the run's: the group's type and state per phase as kcoord reports them,
Kafka's two offline conversions, committed offsets kept, no reprocessing, counts complete and
correct, no task active twice. Once at least once, and once with processing.guarantee=
exactly_once_v2: the instances commit their offsets in their transactions (TxnOffsetCommit with
the member's epoch, through both conversions) and the counts are read read_committed."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from migration.rehearse.streams import StreamsRehearsalPlan, rehearse_streams, write_streams_report
from migration.rehearse.streams_output import OutputReader
from support.java import ensure_java_jars
from support.kcoord import KcoordProcess, serving
from support.names import unique_name
from support.streams_deployment import KCOORD_CONFIG

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.timeout(150)]
# The classic phases' first generation forms 500 ms after the first JoinGroup, not Kafka's 3 s.
CONFIG = (*KCOORD_CONFIG, "group_initial_rebalance_delay_ms=500")


def _abort_one_and_leave_one_open(bootstrap: str, topic: str, word: str) -> Producer:
    """Writes ``word`` = -1 to ``topic`` in a transaction it aborts, then ``word`` = -2 in one it
    leaves open (the producer returned; abort it when done)."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique_name("rs-tx")})
    p.init_transactions(30)
    for value in (b"-1", b"-2"):
        p.begin_transaction()
        p.produce(topic, key=word.encode(), value=value)
        assert p.flush(30) == 0   # in the log before the abort, not purged from the queue
        if value == b"-1":
            p.abort_transaction(30)
    return p


def _read(bootstrap: str, topic: str, read_committed: bool) -> tuple[dict[str, int], dict]:
    reader = OutputReader(bootstrap, topic, read_committed)
    try:
        return reader.read(30.0), reader.summary()
    finally:
        reader.close()


@pytest.fixture(scope="module")
def gateway(kafka44) -> Iterator[KcoordProcess]:
    yield from serving(KcoordProcess(upstream=kafka44.bootstrap, state_topic=unique_name("__kcoord_rehearse_streams"),
                                     config=CONFIG))


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_classic_streams_classic_keeps_offsets_and_counts(gateway, tmp_path, guarantee) -> None:
    plan = StreamsRehearsalPlan(gateway.bootstrap, instances=2, partitions=2, produce_rate=40, phase_s=1.0,
                                settle_timeout_s=45, drain_timeout_s=30, state_dir=tmp_path / "state",
                                java_cache=ensure_java_jars(), run_id=unique_name("rs")[-8:], guarantee=guarantee)
    report = rehearse_streams(plan, progress=print)
    json_path, html_path = write_streams_report(report, tmp_path, "run")
    assert json.loads(json_path.read_text())["verdict"] == report["verdict"]
    assert report["verdict"] == "pass", (report["failures"], report["phases"])
    assert [(p["protocol"], p["group_types_while_running"], p["ok"]) for p in report["phases"]] == [
        ("classic", ["classic"], True), ("streams", ["streams"], True), ("classic", ["classic"], True)]
    assert [(e["from"], e["to"], e["observed"], e["from_empty"]) for e in report["type_changes"]["expected"]] == [
        ("classic", "streams", True, True), ("streams", "classic", True, True)]
    assert all(k["kept"] for k in report["offsets"]["across_phases"]) and report["offsets"]["decreases"] == []
    assert report["input"]["produced"] > 0 and report["input"]["never_processed"] == 0
    assert report["resumptions"] and all(r["ok"] for r in report["resumptions"])
    assert report["counts"]["ok"] and report["active_twice"] == []
    # The rehearsal's last read of the output got to its end; under exactly once it skipped the
    # offsets of transaction markers (and of any aborted records), at least once there are none.
    read = report["output_read"]
    assert read["reached_end"] and read["records"] > 0, read
    assert (read["end_offset"] > read["records"]) == (guarantee == "exactly_once_v2"), read
    html = html_path.read_text()
    assert "<svg" in html and "classic → streams" in html and f"<b>{guarantee}</b>" in html
    if guarantee == "exactly_once_v2":
        _read_committed_skips_aborted_and_open_transactions(gateway.bootstrap, report)


def _read_committed_skips_aborted_and_open_transactions(bootstrap: str, report: dict) -> None:
    """The rehearsal's read_committed reader, on the output of the run above plus an aborted
    transaction and one left open: it counts neither, and its read ends at the open
    transaction (the LSO) rather than running out its budget; a read_uncommitted one sees both."""
    topic, word = report["run"]["output"], "w0"
    producer = _abort_one_and_leave_one_open(bootstrap, topic, word)
    try:
        committed, committed_read = _read(bootstrap, topic, read_committed=True)
        uncommitted, uncommitted_read = _read(bootstrap, topic, read_committed=False)
    finally:
        producer.abort_transaction(30)
    assert uncommitted[word] == -2 and committed[word] > 0, (committed, uncommitted)
    assert sum(committed.values()) == report["counts"]["expected_total"], committed
    assert committed_read["reached_end"] and uncommitted_read["reached_end"]
    assert committed_read["end_offset"] < uncommitted_read["end_offset"], (committed_read, uncommitted_read)
