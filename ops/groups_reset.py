"""What `kcoord groups reset-offsets` resets each group's partitions to (ops/groups_cli.py runs
it): the partitions named (--topic T[:P,P], --all-topics, or a --from-file plan), the time of
--to-datetime / --by-duration, and each partition's target as kafka-consumer-groups computes it
(ConsumerGroupCommand's resetter): a target outside the log moves to its nearest end, except
--to-current, which writes the committed offsets back unchecked and the log end where none is
committed. Reads only: the caller writes the plan."""
from __future__ import annotations

import datetime
import time

from ops import groups_plan
from ops.groups_admin import EARLIEST, LATEST, GroupAdmin, GroupDescription, GroupsError


async def selected_partitions(admin: GroupAdmin, args, committed: dict,
                               d: GroupDescription | None = None) -> list[tuple[str, int]]:
    if getattr(args, "all_topics", False):
        # A streams group: also its topology's source topics, as --all-input-topics does.
        sources = d.topology.source_topics() if d is not None and d.topology is not None else []
        known = await admin.partitions(sources) if sources else {}
        return sorted(set(committed) | {(t, p) for t, ps in known.items() for p in ps})
    if not args.topic:
        raise GroupsError("name the topics: --topic T[:P,P] or --all-topics")
    named = named_topics(args.topic)
    known = await admin.partitions(sorted(named))
    return sorted((t, p) for t, ps in named.items() for p in (ps if ps is not None else known[t]))


def named_topics(items: list[str]) -> dict[str, list[int] | None]:
    """--topic T[:P,P] values: {topic: partitions, or None for all}."""
    named: dict[str, list[int] | None] = {}
    for item in items:
        topic, _, parts = item.partition(":")
        if parts and not all(p.isascii() and p.isdigit() for p in parts.split(",") if p):
            raise GroupsError(f"--topic {item[:80]!r}: partitions are numbers, TOPIC:P,P")
        named[topic] = [int(p) for p in parts.split(",") if p] if parts else None
    return named


def reset_time(args) -> int | None:
    """The ListOffsets time (ms) of --to-datetime or --by-duration."""
    if args.to_datetime is not None:
        return datetime_ms(args.to_datetime)
    if args.by_duration is not None:
        return groups_plan.timestamp_before(time.time_ns() // 1_000_000,
                                            groups_plan.parse_duration_ns(args.by_duration))
    return None


async def targets(admin: GroupAdmin, args, d: GroupDescription, from_file: groups_plan.Plan | None,
                   at: int | None) -> dict[tuple[str, int], int]:
    """The offsets `args` asks for the group's partitions (`at`: the time to reset to)."""
    committed = await admin.committed(d.group_id)
    if from_file is not None:
        wanted = from_file[d.group_id]
        partitions = sorted(wanted)
        known = await admin.partitions(sorted({t for t, _ in partitions})) if partitions else {}
        for t, p in partitions:
            if p not in known.get(t, ()):
                raise groups_plan.PlanError(f"--from-file names {t}-{p}: {t} has partitions {known.get(t)}")
    else:
        partitions = await selected_partitions(admin, args, committed, d)
    earliest = await admin.list_offsets(partitions, EARLIEST)
    latest = await admin.list_offsets(partitions, LATEST)
    if args.to_current:
        # Kafka writes the committed offsets back unchecked; the log end where none is committed.
        return {tp: committed[tp][0] if tp in committed else latest[tp] for tp in partitions}
    if args.to_earliest:
        target = dict(earliest)
    elif args.to_latest:
        target = dict(latest)
    elif at is not None:
        target = await admin.list_offsets(partitions, at)
    elif args.to_offset is not None:
        target = {tp: args.to_offset for tp in partitions}
    elif from_file is not None:
        target = dict(from_file[d.group_id])
    else:
        target = {tp: committed.get(tp, (latest[tp], ""))[0] + args.shift_by for tp in partitions}
    # As kafka-consumer-groups: a target outside the log is moved to its nearest end.
    return {tp: min(max(o, earliest[tp]), latest[tp]) for tp, o in target.items()}


def datetime_ms(text: str) -> int:
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise GroupsError(f"--to-datetime {text[:60]!r} is not an ISO 8601 time (e.g. 2026-11-25T10:00:00.000)") \
            from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return max(int(when.timestamp() * 1000), 0)
