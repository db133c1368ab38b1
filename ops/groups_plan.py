"""Reset plans of `kcoord groups reset-offsets`: the CSV that `--export` prints and
`--from-file` reads, and the ISO-8601 duration of `--by-duration`, as Kafka's
kafka-consumer-groups.sh (ConsumerGroupCommand, CsvUtils) writes and reads them, so a file
written by either tool is read by the other.

Rules:
- a plan is {group: {(topic, partition): offset}};
- one line per partition, no header: `topic,partition,offset` when exactly one `--group` is
  given, `group,topic,partition,offset` otherwise (Kafka's `isSingleGroupQuery`);
- a string field is quoted as Jackson's CSV writer (Kafka's) quotes it with default settings:
  when it is longer than 24 UTF-16 units or holds a character below '-' (comma, quote,
  space, '#', control characters...); a quote inside doubles;
- reading takes both layouts (the first line's field count decides; a 3-field file needs
  exactly one group); unlike Kafka's reader, which fills missing fields with 0, a line with
  another number of fields, a bad number, an illegal topic name or a partition named twice
  is refused with its line number: the file is a user's input;
- the file is bounded (MAX_PLAN_BYTES) and decoded as UTF-8;
- a duration is Java's `Duration.parse` grammar, `[-+]P[nD][T[nH][nM][n[.f]S]]` (each number
  signed, case-insensitive, at least one part, up to 9 fraction digits on seconds); the reset
  time is now minus it, kept inside [0, 2^63-1] ms (a negative ListOffsets timestamp would
  name LATEST or EARLIEST instead of a time).
"""
from __future__ import annotations

import csv
import re

from ops.groups_admin import GroupsError

MAX_PLAN_BYTES = 64 * 1024 * 1024
Plan = dict[str, dict[tuple[str, int], int]]

_MAX_UNQUOTED = 24          # Jackson CsvEncoder.MAX_QUOTE_CHECK
_MIN_SAFE_CHAR = ord(",") + 1   # Jackson: max(separator, quote, line feed) + 1
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")   # Kafka's legal topic names
_INT = re.compile(r"[+-]?[0-9]{1,20}")
_I32_MAX, _I64_MAX = 2**31 - 1, 2**63 - 1


class PlanError(GroupsError):
    """A reset plan file or a duration that cannot be read: the message names where and why."""


# ------------------------------------------------------------------------- CSV
def _field(value: str) -> str:
    units = len(value.encode("utf-16-le")) // 2       # Java's String.length()
    if units > _MAX_UNQUOTED or any(ord(c) < _MIN_SAFE_CHAR for c in value):
        return '"' + value.replace('"', '""') + '"'
    return value


def format_plan(plan: Plan, with_group: bool) -> str:
    """The plan as Kafka's --export prints it (a line each, sorted), without the tool's final
    blank line."""
    lines = []
    for group in sorted(plan):
        for (topic, partition), offset in sorted(plan[group].items()):
            head = [_field(group)] if with_group else []
            lines.append(",".join([*head, _field(topic), str(partition), str(offset)]) + "\n")
    return "".join(lines)


def read_plan_file(path: str, groups: list[str]) -> Plan:
    """The plan in the file at `path` for `groups` (the --group values; several or none: the
    file must have the group column)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PLAN_BYTES + 1)
    except OSError as e:
        raise PlanError(f"cannot read --from-file {path}: {e.strerror or e}") from None
    if len(data) > MAX_PLAN_BYTES:
        raise PlanError(f"--from-file {path} is larger than {MAX_PLAN_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise PlanError(f"{path} line {line}: not UTF-8 (byte {e.start})") from None
    return parse_plan(text, groups, source=path)


def parse_plan(text: str, groups: list[str], source: str = "the plan") -> Plan:
    """{group: {(topic, partition): offset}} of a CSV plan; PlanError names the first bad line."""
    plan: Plan = {}
    seen: dict[tuple[str, str, int], int] = {}
    width = 0
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.removesuffix("\r")
        if not line.strip():
            continue                 # Kafka's export ends with a blank line
        where = f"{source} line {number}"
        try:
            fields = next(csv.reader([line], strict=True))
        except csv.Error as e:
            raise PlanError(f"{where}: not CSV ({e})") from None
        if not width:
            width = len(fields)
            if width not in (3, 4):
                raise PlanError(f"{where}: {width} fields; expected topic,partition,offset or "
                                f"group,topic,partition,offset")
            if width == 3 and len(groups) != 1:
                raise PlanError(f"{where}: lines of topic,partition,offset name no group: give exactly one --group "
                                f"(or a file of group,topic,partition,offset)")
        elif len(fields) != width:
            raise PlanError(f"{where}: {len(fields)} fields; the first line has {width}")
        group = groups[0] if width == 3 else fields[0]
        topic, partition, offset = fields[-3:]
        if not _TOPIC.fullmatch(topic):
            raise PlanError(f"{where}: {topic[:60]!r} is not a topic name (1-249 of a-z A-Z 0-9 . _ -)")
        p = _number(partition, 0, _I32_MAX, where, "partition")
        o = _number(offset, -_I64_MAX - 1, _I64_MAX, where, "offset")
        key = (group, topic, p)
        if key in seen:
            raise PlanError(f"{where}: {topic}-{p} of group {group!r} is already at line {seen[key]}")
        seen[key] = number
        plan.setdefault(group, {})[(topic, p)] = o
    return plan


def _number(text: str, low: int, high: int, where: str, what: str) -> int:
    value = text.strip()
    if _INT.fullmatch(value) and low <= int(value) <= high:
        return int(value)
    raise PlanError(f"{where}: {what} {text[:30]!r} is not an integer in [{low}, {high}]")


# -------------------------------------------------------------------- duration
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?"
                       r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
                       re.IGNORECASE)
_NS = 1_000_000_000


def parse_duration_ns(text: str) -> int:
    """Nanoseconds of an ISO-8601 duration as Java's Duration.parse reads it ('P1DT2H',
    'PT-0.5S', '-PT15M'); PlanError otherwise. Digits are bounded: Java's long seconds overflow
    beyond what 19 digits hold, so longer numbers are refused."""
    m = _DURATION.fullmatch(text) if len(text) <= 100 else None
    if m is None or m.group(3) in ("T", "t") or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise PlanError(f"--by-duration {text[:100]!r} is not a duration PnDTnHnMn.nS (e.g. PT15M, P1DT2H)")
    days, hours, minutes, seconds, fraction = (m.group(i) for i in (2, 4, 5, 6, 7))
    total = 0
    for part, unit in ((days, 86_400), (hours, 3_600), (minutes, 60), (seconds, 1)):
        if part:
            total += int(part) * unit * _NS
    if fraction:
        nanos = int(fraction.ljust(9, "0"))
        total += -nanos if seconds.startswith("-") else nanos
    if m.group(1) == "-":
        total = -total
    if abs(total) > _I64_MAX * _NS:
        raise PlanError(f"--by-duration {text!r} is out of range (Java's Duration holds 2^63 seconds)")
    return total


def timestamp_before(now_ms: int, duration_ns: int) -> int:
    """The ListOffsets time (ms) `duration_ns` before `now_ms`, kept to [0, 2^63-1]: a time
    before 1970 reads from the first record, one past the end of time from the log end."""
    now_ns = now_ms * 1_000_000
    return min(max((now_ns - duration_ns) // 1_000_000, 0), _I64_MAX)
