"""Reset plans of `kcoord groups reset-offsets` (ops/groups_plan.py): the CSV of --export and
--from-file as Kafka 4.4's kafka-consumer-groups (Jackson CSV 2.21, CsvUtils) writes and reads
it, and --by-duration's ISO-8601 durations as Java's Duration.parse reads them.

The expected CSV lines were printed by Kafka 4.4's own CsvUtils writers (kafka-tools-4.4.0,
jackson-dataformat-csv 2.21.7) for the same records."""
from __future__ import annotations

import pytest

from ops.groups_plan import (
    MAX_PLAN_BYTES,
    PlanError,
    format_plan,
    parse_duration_ns,
    parse_plan,
    read_plan_file,
    timestamp_before,
)

# name -> how Kafka's writer prints it as a CSV field
KAFKA_FIELDS = {
    "t": "t",
    "groups-cli-abcdef": "groups-cli-abcdef",
    "a-topic-name-of-24-chars": "a-topic-name-of-24-chars",
    "a-topic-name-of-25-charss": '"a-topic-name-of-25-charss"',     # longer than 24: quoted
    "x.y_z-1": "x.y_z-1",
    "g,1": '"g,1"',
    'g"q': '"g""q"',
    "g h": '"g h"',
    "#g": '"#g"',
    "": "",
    "g\tx": '"g\tx"',
    "gé": "gé",
    "a+b": '"a+b"',
}


@pytest.mark.parametrize("name", sorted(KAFKA_FIELDS))
def test_fields_are_quoted_as_kafkas_writer_quotes_them(name):
    assert format_plan({name: {("t", 1): 7}}, with_group=True) == f"{KAFKA_FIELDS[name]},t,1,7\n"


def test_one_group_has_no_group_column_and_lines_are_sorted():
    plan = {"g": {("t", 2): 9, ("t", 0): 5, ("a-topic-name-of-25-charss", 0): 0}}
    assert format_plan(plan, with_group=False) == '"a-topic-name-of-25-charss",0,0\nt,0,5\nt,2,9\n'
    assert format_plan({}, with_group=False) == ""


@pytest.mark.parametrize("name", sorted(KAFKA_FIELDS))
def test_what_is_written_reads_back(name):
    plan = {name: {("topic.a", 0): 3, ("b-" * 20, 11): 2**63 - 1}}
    text = format_plan(plan, with_group=True)
    assert parse_plan(text, [name, "other"]) == plan
    if name:
        assert parse_plan(format_plan(plan, with_group=False), [name]) == plan


def test_both_layouts_and_kafkas_trailing_blank_line_and_crlf():
    assert parse_plan("t,0,5\nt,1,6\n\n", ["g"]) == {"g": {("t", 0): 5, ("t", 1): 6}}
    assert parse_plan("g1,t,0,5\r\ng2,t,0,7\r\n", ["g1", "g2"]) == {"g1": {("t", 0): 5}, "g2": {("t", 0): 7}}
    # the group column with one --group: Kafka reads it too
    assert parse_plan("g1,t,0,5\n", ["g1"]) == {"g1": {("t", 0): 5}}
    # numbers with blanks around, as Jackson reads them; a negative offset is clamped later
    assert parse_plan("t, 0 ,-5\n", ["g"]) == {"g": {("t", 0): -5}}


@pytest.mark.parametrize("text, groups, says", [
    ("t,0\n", ["g"], "line 1: 2 fields"),                       # Kafka would take offset 0
    ("t,0,5\nt,1\n", ["g"], "line 2: 2 fields; the first line has 3"),
    ("t,0,5,6,7\n", ["g"], "line 1: 5 fields"),
    ("t,0,5\n", ["g1", "g2"], "name no group"),
    ("t,0,5\n", [], "name no group"),                           # --all-groups
    ("t,abc,5\n", ["g"], "line 1: partition 'abc' is not an integer"),
    ("t,-1,5\n", ["g"], "line 1: partition '-1'"),
    ("t,2147483648,5\n", ["g"], "partition '2147483648'"),
    ("t,0,99999999999999999999\n", ["g"], "offset '99999999999999999999'"),
    ("t,0,٣\n", ["g"], "offset '٣'"),                           # digits are ASCII, as Jackson's
    ("t,0,1_0\n", ["g"], "offset '1_0'"),
    ("\n\nt,0,5\nbad topic,0,5\n", ["g"], "line 4: 'bad topic' is not a topic name"),
    (",0,5\n", ["g"], "line 1: '' is not a topic name"),
    ("x" * 250 + ",0,5\n", ["g"], "is not a topic name"),
    ('"t,0,5\n', ["g"], "line 1: not CSV"),
    ('t"x",0,5\n', ["g"], "line 1: 't\"x\"' is not a topic name"),     # a quote inside a field
    ("t,0,5\nt,0,6\n", ["g"], "line 2: t-0 of group 'g' is already at line 1"),
    ("g,t,0,5\nh,t,0,6\ng,t,0,7\n", ["g", "h"], "line 3: t-0 of group 'g' is already at line 1"),
])
def test_malformed_lines_are_named(text, groups, says):
    with pytest.raises(PlanError) as e:
        parse_plan(text, groups, source="plan.csv")
    assert says in str(e.value) and "plan.csv" in str(e.value)


def test_an_empty_plan_is_empty():
    assert parse_plan("", ["g"]) == {}
    assert parse_plan("\n\n", ["g1", "g2"]) == {}


def test_the_file_is_bounded_decoded_and_its_errors_are_messages(tmp_path):
    f = tmp_path / "plan.csv"
    f.write_bytes(b"t,0,5\n")
    assert read_plan_file(str(f), ["g"]) == {"g": {("t", 0): 5}}
    f.write_bytes(b"t,0,5\nt\xff,0,5\n")
    with pytest.raises(PlanError, match=r"plan.csv line 2: not UTF-8"):
        read_plan_file(str(f), ["g"])
    with pytest.raises(PlanError, match="cannot read --from-file"):
        read_plan_file(str(tmp_path / "missing.csv"), ["g"])
    with pytest.raises(PlanError, match="cannot read --from-file"):
        read_plan_file(str(tmp_path), ["g"])                    # a directory
    with f.open("wb") as big:
        big.truncate(MAX_PLAN_BYTES + 1)
    with pytest.raises(PlanError, match="larger than"):
        read_plan_file(str(f), ["g"])


# ------------------------------------------------------------------- durations
S = 1_000_000_000


@pytest.mark.parametrize("text, ns", [
    ("PT15M", 15 * 60 * S),
    ("P1DT2H", (86_400 + 7_200) * S),
    ("pt1h30m", 5_400 * S),                         # case-insensitive
    ("P2D", 2 * 86_400 * S),
    ("PT0.5S", S // 2),
    ("PT1,25S", S + S // 4),                        # a comma as the decimal point
    ("PT1.S", S),                                   # no fraction digits
    ("PT-0.5S", -S // 2),                           # the fraction takes the seconds' sign
    ("PT-1.5S", -(S + S // 2)),
    ("-PT15M", -15 * 60 * S),
    ("-PT-15M", 15 * 60 * S),
    ("+P1D", 86_400 * S),
    ("PT0.000000001S", 1),
    ("P1DT1H1M1.1S", (86_400 + 3_600 + 60 + 1) * S + S // 10),
])
def test_durations_as_java_reads_them(text, ns):
    assert parse_duration_ns(text) == ns


@pytest.mark.parametrize("text", ["", "P", "PT", "P1", "1D", "PT1D", "P1H", "P1W", "P1Y", "P1M", "PT.5S",
                                  "PT0.1234567891S", "PT1.5M", "P1DT", "PT1S ", " PT1S", "PT١S", "PT15M" + "0" * 200,
                                  "P99999999999999999999D"])
def test_bad_durations_are_named(text):
    with pytest.raises(PlanError, match="--by-duration"):
        parse_duration_ns(text)


def test_the_reset_time_is_now_minus_the_duration_within_the_timestamps_listoffsets_takes():
    now = 1_780_000_000_123
    assert timestamp_before(now, parse_duration_ns("PT15M")) == now - 15 * 60_000
    assert timestamp_before(now, parse_duration_ns("PT0.0005S")) == now - 1     # floored, as toEpochMilli
    assert timestamp_before(now, parse_duration_ns("-PT1S")) == now + 1000
    # before 1970 would be a negative time: ListOffsets reads -1 and -2 as LATEST and EARLIEST
    assert timestamp_before(now, parse_duration_ns("P36500D")) == 0
    assert timestamp_before(now, parse_duration_ns("-PT9223372036854775807S")) == 2**63 - 1
