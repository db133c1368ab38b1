"""The Streams rebalance benchmark's start diagnosis (bench/bench_streams_rebalance.py): each
instance's start timeline from its own lines (bench/streams_rebalance_lines.py) and the group's
account from Kafka's server.log (bench/streams_rebalance_groups.py)."""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from coordinator.group.streams import records as rh
from coordinator.group.streams.model import StreamsMember, Tasks
from ops.recordjson import to_dict, type_name

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import streams_rebalance_groups as groups  # noqa: E402
import streams_rebalance_lines as lines  # noqa: E402

S = 1_000_000_000


def ev(t_s: float, event: str, **fields) -> dict:
    return {"event": event, "t": int(t_s * S), **fields}


# An early member: tasks at once, then most of them moved away; REBALANCING twice.
EARLY = [ev(0, "ready"), ev(0.1, "state", state="REBALANCING"), ev(2, "active", phase="open", task="0_0"),
         ev(2.1, "active", phase="open", task="0_1"), ev(2.5, "tasks", active=["0_0", "0_1"], standby=[]),
         ev(2.6, "state", state="RUNNING"), ev(3, "state", state="REBALANCING"),
         ev(3.2, "active", phase="close", task="0_1"), ev(3.5, "tasks", active=["0_0"], standby=[]),
         ev(3.6, "state", state="RUNNING")]
# A late member: REBALANCING from its start until its only task runs.
LATE = [ev(1, "ready"), ev(1.1, "state", state="REBALANCING"), ev(3.4, "active", phase="open", task="0_1"),
        ev(3.5, "tasks", active=["0_1"], standby=[]), ev(3.55, "state", state="RUNNING")]


def test_a_timeline_counts_the_task_moves_and_the_rebalancing_spans() -> None:
    early = lines.start_timeline(EARLY, origin_ns=1 * S)
    assert early["ready"] == -1.0 and early["first_task_open"] == 1.0 and early["first_active_tasks_line"] == 1.5
    assert early["first_running_with_task"] == 1.6
    assert (early["opens"], early["closes"], early["active_sizes"]) == (2, 1, [2, 1])
    assert early["rebalancing"] == [(-0.9, 1.6), (2.0, 2.6)]
    late = lines.start_timeline(LATE, origin_ns=1 * S)
    assert late["rebalancing"] == [(0.1, 2.55)] and late["closes"] == 0


def test_a_timeline_stops_at_the_given_end_and_keeps_an_open_span_open() -> None:
    cut = lines.start_timeline(EARLY, origin_ns=0, until_ns=int(3.1 * S))
    assert cut["rebalancing"] == [(0.1, 2.6), (3.0, None)] and cut["closes"] == 0


def test_the_summary_spreads_first_tasks_and_adds_the_moves() -> None:
    summary = lines.start_summary([lines.start_timeline(e, 1 * S) for e in (EARLY, LATE)])
    assert summary["first_task_open_min_med_max"] == [1.0, 2.4, 2.4]
    assert (summary["opens"], summary["closes"], summary["rebalancing_spans"]) == (3, 1, 3)


def kafka_line(at: str, group: str, member: str, message: str) -> str:
    """One GroupMetadataManager INFO line as Kafka 4.4 writes it."""
    return (f"[2026-11-30 02:27:{at}] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=40] "
            f"[GroupId {group}][MemberId {member}] {message} (org.apache.kafka.coordinator.group.GroupMetadataManager)")


def assigned(epoch: int, previous: int, *tasks: str) -> str:
    return (f"Member's new assignment state: epoch={epoch}, previousEpoch={previous}, state=STABLE, assignedTasks="
            f"(active=[{', '.join(tasks)}], standby=[], warmup=[]) and tasksPendingRevocation=(active=[], "
            "standby=[], warmup=[]).")


def bumped(epoch: int, validated: int) -> str:
    return f"Bumped streams group epoch to {epoch} with metadata hash 1 and validated topic epoch {validated}."


KAFKA_LOG = "\n".join([
    kafka_line("01,905", "g", "AAAA", "Member joins the streams group."),
    kafka_line("02,164", "g", "AAAA", bumped(2, -1)),
    kafka_line("02,467", "other", "CCCC", "Member joins the streams group."),
    kafka_line("02,500", "g", "BBBB", "Member joins the streams group."),
    kafka_line("04,097", "g", "BBBB", bumped(4, 0)),
    kafka_line("04,104", "g", "BBBB", assigned(4, 3, "0-6@4", "0-19@4", "1-3@4")),
    kafka_line("04,107", "g", "AAAA", assigned(4, 2, "0-4@4")),
]) + "\n"


def test_kafkas_log_gives_the_joins_the_validated_topology_and_the_first_target(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(KAFKA_LOG)
    origin = 1796005621.905      # 2026-11-30 02:27:01.905 UTC, the first join
    got = groups.kafka_group(log, "g", origin)
    assert got == {"joins": 2, "first_join": 0.0, "last_join": 0.595, "topology_ready": 2.192, "joined_by_ready": 2,
                   "first_target_after_ready_active_per_member": [3, 1],
                   "first_handed_s": {"BBBB": 2.199, "AAAA": 2.202}}


def test_an_unreadable_log_is_said_not_raised(tmp_path: Path) -> None:
    assert "error" in groups.kafka_group(tmp_path / "missing.log", "g", 0.0)


def dumped(at_ms: int, record) -> str:
    """One line of `kcoord offsets dump` for ``record`` (ops/show.py's shape)."""
    return json.dumps({"timestamp": at_ms, "type": type_name(int(record.key.record_type)),
                       "key": to_dict(record.key), "value": to_dict(record.value)})


def test_kcoords_state_topic_names_each_instance_by_its_client_and_when_it_was_first_handed_tasks() -> None:
    early = StreamsMember("AAAA", client_id="app-i3-StreamThread-1-consumer")
    late = StreamsMember("BBBB", client_id="app-i7-StreamThread-1-consumer")
    one, two = Tasks(frozenset({("0", 1)}), frozenset(), frozenset()), Tasks(frozenset({("0", 2)}), frozenset(),
                                                                            frozenset())
    dump = [dumped(1000, rh.member_metadata("g", early)),
            dumped(1100, rh.current_assignment("g", replace(early, member_epoch=2))),      # joined with nothing
            dumped(1200, rh.member_metadata("other", late)),
            dumped(1300, rh.member_metadata("g", late)),
            dumped(1400, rh.current_assignment("g", replace(late, member_epoch=3, assigned=one,
                                                            active_epochs={("0", 1): 3}))),
            dumped(1500, rh.current_assignment("g", replace(early, member_epoch=4, assigned=two,
                                                            active_epochs={("0", 2): 4}))),
            dumped(1600, rh.current_assignment("g", replace(late, member_epoch=4, assigned=one,
                                                            active_epochs={("0", 1): 3})))]
    got = groups.dump_summary(dump, "g", 1.0)
    assert got is not None
    assert got["first_handed_s"] == {"app-i7": 0.4, "app-i3": 0.5}
    assert got["joins"] == 2
    assert groups.dump_summary(dump, "missing", 1.0) is None
