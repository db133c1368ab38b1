"""`kcoord groups reset-offsets` planning against an admin that answers from a table (the wire
is the integration test's, tests/integration/ops/test_groups_cli.py): the targets each option
gives, as kafka-consumer-groups computes them (ConsumerGroupCommand.prepareOffsetsToReset),
and what is refused before anything is written."""
from __future__ import annotations

import argparse
import asyncio

import pytest

from ops import groups_cli
from ops.groups_admin import EARLIEST, LATEST, GroupDescription, GroupsError, Member

# topic t: partition 0 holds offsets 2..10, partition 1 holds 0..4; offset 6 of t-0 is at 1000 ms
LOGS = {("t", 0): (2, 10), ("t", 1): (0, 4)}
AT_1000 = {("t", 0): 6, ("t", 1): 4}


class TableAdmin:
    """GroupAdmin's calls that reset-offsets makes, answered from LOGS and `committed`."""

    def __init__(self, committed: dict[str, dict[tuple[str, int], int]], members: dict[str, int] | None = None):
        self.offsets = committed
        self.members = members or {}
        self.commits: list[tuple[str, dict]] = []
        self.times: list[int] = []

    async def list_groups(self, *_):
        return [(g, "consumer", "Empty", "consumer") for g in sorted(self.offsets)]

    async def describe(self, group: str) -> GroupDescription:
        n = self.members.get(group, 0)
        return GroupDescription(group_id=group, type="consumer", state="Stable" if n else "Empty",
                                protocol_type="consumer", members=[Member(f"m{i}", "c", "/h") for i in range(n)])

    async def committed(self, group: str):
        return {tp: (o, "") for tp, o in self.offsets.get(group, {}).items()}

    async def partitions(self, topics: list[str]):
        if set(topics) - {"t"}:
            raise GroupsError(f"Metadata({sorted(set(topics) - {'t'})[0]}): UNKNOWN_TOPIC_OR_PARTITION")
        return {"t": [0, 1]}

    async def list_offsets(self, partitions, timestamp: int):
        if timestamp not in (EARLIEST, LATEST):
            self.times.append(timestamp)
        return {tp: LOGS[tp][0] if timestamp == EARLIEST else LOGS[tp][1] if timestamp == LATEST
                else AT_1000[tp] for tp in partitions}

    async def commit(self, group: str, offsets):
        self.commits.append((group, dict(offsets)))


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    groups_cli.register(parser.add_subparsers())
    return parser.parse_args(["groups", "reset-offsets", "--bootstrap-server", "b:9092", *argv])


def reset(admin: TableAdmin, *argv: str) -> int:
    return asyncio.run(groups_cli._reset(admin, parse(*argv)))


def test_to_current_keeps_committed_offsets_unmoved_and_takes_the_log_end_where_none(capsys):
    admin = TableAdmin({"g": {("t", 0): 1}})        # 1 is before the log start (2): Kafka keeps it
    assert reset(admin, "--group", "g", "--topic", "t", "--to-current", "--execute", "--export") == 0
    assert capsys.readouterr().out == "t,0,1\nt,1,4\n\n"
    assert admin.commits == [("g", {("t", 0): 1, ("t", 1): 4})]


def test_other_targets_are_moved_into_the_log(capsys):
    admin = TableAdmin({"g": {("t", 0): 8}})
    assert reset(admin, "--group", "g", "--topic", "t", "--shift-by", "5", "--dry-run", "--export") == 0
    assert capsys.readouterr().out == "t,0,10\nt,1,4\n\n"       # 13 -> 10; no commit on t-1: its end + 5 -> 4
    assert reset(admin, "--group", "g", "--topic", "t:0", "--to-offset", "0", "--dry-run", "--export") == 0
    assert capsys.readouterr().out == "t,0,2\n\n"
    assert admin.commits == []


def test_by_duration_asks_the_offsets_at_now_minus_the_duration(capsys):
    admin = TableAdmin({"g": {}})
    assert reset(admin, "--group", "g", "--topic", "t", "--by-duration", "P36500D", "--dry-run", "--export") == 0
    assert capsys.readouterr().out == "t,0,6\nt,1,4\n\n"
    assert admin.times == [0]                       # before 1970: time 0, never a negative (special) one


def test_from_file_resets_the_named_groups_to_the_file_and_reports_a_missing_one(tmp_path, capsys):
    plan = tmp_path / "plan.csv"
    plan.write_text("g1,t,0,99\ng1,t,1,3\ng2,t,0,-1\nother,t,0,5\n")
    admin = TableAdmin({"g1": {}, "g2": {}, "g3": {}})
    assert reset(admin, "--group", "g1", "--group", "g2", "--group", "g3", "--from-file", str(plan),
                 "--execute", "--export") == 1
    out = capsys.readouterr()
    assert out.out == "g1,t,0,10\ng1,t,1,3\ng2,t,0,2\n\n"
    assert "Error: No reset plan for group g3 found." in out.err
    assert admin.commits == [("g1", {("t", 0): 10, ("t", 1): 3}), ("g2", {("t", 0): 2})]


def test_a_group_with_members_is_refused_execute_and_the_others_are_reset(capsys):
    admin = TableAdmin({"g1": {("t", 0): 5}, "g2": {("t", 0): 5}}, members={"g1": 1})
    assert reset(admin, "--all-groups", "--topic", "t:0", "--to-earliest", "--execute", "--json") == 1
    out = capsys.readouterr()
    assert "Assignments can only be reset if the group 'g1' is inactive, but the current state is Stable." in out.err
    assert '"group": "g2"' in out.out and '"group": "g1"' not in out.out
    assert admin.commits == [("g2", {("t", 0): 2})]


@pytest.mark.parametrize("argv, says", [
    (("--topic", "t", "--by-duration", "PT"), "--by-duration 'PT' is not a duration"),
    (("--topic", "t", "--to-datetime", "yesterday"), "--to-datetime 'yesterday' is not an ISO 8601 time"),
    (("--topic", "t:0,x", "--to-earliest"), "partitions are numbers"),
    (("--topic", "t", "--to-current", "--json", "--export"), "takes no --json"),
])
def test_bad_arguments_are_refused_before_any_request(argv, says):
    admin = TableAdmin({"g": {}})
    admin.describe = None                           # type: ignore[method-assign]  # never reached
    with pytest.raises(GroupsError, match=says):
        reset(admin, "--group", "g", *argv, "--execute")


def test_a_plan_naming_what_the_cluster_lacks_writes_nothing(tmp_path):
    plan = tmp_path / "plan.csv"
    for text, says in (("g1,t,0,3\ng2,t,7,3\n", "--from-file names t-7"),
                       ("g1,t,0,3\ng2,gone,0,3\n", "Metadata\\(gone\\)")):
        plan.write_text(text)
        admin = TableAdmin({"g1": {}, "g2": {}})
        with pytest.raises(GroupsError, match=says):
            reset(admin, "--group", "g1", "--group", "g2", "--from-file", str(plan), "--execute")
        assert admin.commits == []
