"""`kcoord groups`: the groups of a running cluster, as `kafka-consumer-groups.sh` (and, for
streams groups, `kafka-streams-groups.sh`) shows them, against kcoord or Apache Kafka alike (it
speaks only the Kafka protocol).

    kcoord groups list     --bootstrap-server HOST:PORT [--state S] [--type T] [--json]
    kcoord groups describe --bootstrap-server HOST:PORT (--group G ... | --all-groups)
                           [--members | --offsets (default) | --state] [--json]
    kcoord groups reset-offsets   --bootstrap-server ... (--group G ... | --all-groups)
                           (--topic T[:P,P] ... | --all-topics)
                           (--to-earliest | --to-latest | --to-current | --to-datetime ISO | --by-duration PnDTnHnMnS
                            | --to-offset N | --shift-by N | --from-file CSV)
                           (--dry-run | --execute) [--export | --json] [--delete-internal-topics]
    kcoord groups delete-offsets  --bootstrap-server ... --group G --topic T[:P,P] ...
    kcoord groups delete          --bootstrap-server ... (--group G ... | --all-groups)
                           [--delete-internal-topics]
    kcoord groups configs         --bootstrap-server ... (--group G ... | --all-groups)
                           [--set KEY=VALUE ...] [--delete KEY ...] [--json]

`--command-config FILE` holds client properties for a secured cluster (security.protocol,
sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ...: librdkafka's names, as
Kafka's `--command-config` takes Java's). Beyond kafka-consumer-groups, `describe` shows the
group type, the KIP-848 group epoch and assignment epoch, and each member's epoch, current
and target assignment. A kcoord `connect` group (docs/design/connect-groups-spec.md) has no partitions: `describe`
(offsets or members) lists its workers with their connectors and tasks, in a table of its
own (in JSON, rows with `worker_id`). A streams group (KIP-1071, ops/groups_streams.py):
`describe` shows the partitions its active tasks read with their owners and lag, `--members`
each member's process, endpoint, topology epoch and active/standby/warmup tasks, current and
target (a table of its own; in JSON, rows with `process_id`), `--state` its topology epoch;
`--all-topics` of reset-offsets also takes its topology's source topics. Its internal topics
(repartition and changelog) are deleted only when asked: `--delete-internal-topics` on
`delete` or on `reset-offsets --execute`.

reset-offsets as kafka-consumer-groups' (ConsumerGroupCommand): a target outside the log is
moved to its nearest end, except `--to-current`, which writes the committed offsets back as
they are and the log-end offset where none is committed; `--by-duration` is the offset at now
minus the duration; `--export` prints the plan as Kafka's CSV and `--from-file` reads such a
file (ops/groups_plan.py; the file names the partitions: --topic and --all-topics are not
needed, and ignored as Kafka ignores them). A group with members is refused `--execute`
("Assignments can only be reset if the group ... is inactive"); the other groups named are
reset, and the command ends with 1.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson

from coordinator.upstream.client import UpstreamError
from ops import groups_configs, groups_plan, groups_reset, groups_streams
from ops.groups_admin import LATEST, GroupAdmin, GroupDescription, GroupsError

# Reset is an admin commit: Kafka refuses it for a group with members, so check first
# ("Assignments can only be reset if the group ... is inactive").
_RESETTABLE_STATES = {"Empty", "Dead", "EMPTY", "DEAD"}


def register(subparsers) -> None:
    p = subparsers.add_parser("groups", help="list, describe, reset and delete groups of a running cluster",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="groups_command", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of kcoord or Kafka")
        q.add_argument("--command-config", help="client properties file (security settings)")
        q.add_argument("--json", action="store_true", help="JSON instead of the table")

    q = sub.add_parser("list", help="every group, as --list")
    common(q)
    q.add_argument("--state", action="append", default=[], help="only groups in this state (repeatable)")
    q.add_argument("--type", action="append", default=[], help="only groups of this type: consumer, classic, streams")
    q.set_defaults(func=_run(_list))

    q = sub.add_parser("describe", help="groups with their offsets and lag, members or state")
    common(q)
    _groups_arg(q)
    view = q.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true")
    view.add_argument("--offsets", action="store_true")
    view.add_argument("--state", action="store_true")
    q.set_defaults(func=_run(_describe))

    q = sub.add_parser("reset-offsets", help="move groups' committed offsets")
    common(q)
    _groups_arg(q)
    _topics_arg(q, required=False)
    q.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    to = q.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-current", action="store_true", help="the committed offsets (the log end where none)")
    to.add_argument("--to-datetime", help="ISO 8601, e.g. 2026-11-25T10:00:00.000 (UTC unless an offset is given)")
    to.add_argument("--by-duration", help="the offset at now minus this ISO 8601 duration, e.g. PT15M, P1DT2H")
    to.add_argument("--to-offset", type=int)
    to.add_argument("--shift-by", type=int)
    to.add_argument("--from-file", help="the offsets of a CSV plan (topic,partition,offset or "
                                        "group,topic,partition,offset), as --export writes it")
    run = q.add_mutually_exclusive_group(required=True)
    run.add_argument("--dry-run", action="store_true")
    run.add_argument("--execute", action="store_true")
    q.add_argument("--export", action="store_true",
                   help="print the plan as Kafka's CSV (with a group column unless one --group is given)")
    _internal_topics_arg(q)
    q.set_defaults(func=_run(_reset))

    q = sub.add_parser("delete-offsets", help="delete a group's offsets of some topics")
    common(q)
    q.add_argument("--group", required=True)
    _topics_arg(q, required=True)
    q.set_defaults(func=_run(_delete_offsets))

    q = sub.add_parser("delete", help="delete empty groups")
    common(q)
    _groups_arg(q)
    _internal_topics_arg(q)
    q.set_defaults(func=_run(_delete))

    groups_configs.register(sub, common, _run, _out)   # `kcoord groups configs` (ops/groups_configs.py)


def _groups_arg(q: argparse.ArgumentParser) -> None:
    which = q.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", action="append", help="repeatable")
    which.add_argument("--all-groups", action="store_true")


def _internal_topics_arg(q: argparse.ArgumentParser) -> None:
    q.add_argument("--delete-internal-topics", action="store_true",
                   help="streams groups: also delete their repartition and changelog topics")


def _topics_arg(q: argparse.ArgumentParser, required: bool) -> None:
    q.add_argument("--topic", action="append", required=required, default=None,
                   help="TOPIC or TOPIC:P,P (repeatable)")


def _run(command):
    def func(args: argparse.Namespace) -> int:
        security = _security(args.command_config)
        try:
            return asyncio.run(_with_admin(command, args, security))
        except (GroupsError, UpstreamError) as e:
            print(f"Error: {e}", file=sys.stderr)
            return 1
    return func


async def _with_admin(command, args, security) -> int:
    async with GroupAdmin(args.bootstrap_server, security) as admin:
        return await command(admin, args)


def _security(path: str | None):
    if path is None:
        return None
    from coordinator.security.settings import resolve
    from coordinator.security.upstream import UpstreamSecurity

    props = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            props[f"upstream.{key.strip()}"] = value.strip()
    return UpstreamSecurity.from_settings(resolve(props))


def _out(args, rows: list[dict], header: list[str], keys: list[str], file=None) -> None:
    if args.json:
        (file or sys.stdout).write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    table = [header] + [["-" if r.get(k) is None else str(r.get(k)) for k in keys] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print(" ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip(), file=file)


# ------------------------------------------------------------------- commands
async def _list(admin: GroupAdmin, args) -> int:
    groups = await admin.list_groups(tuple(s.upper() for s in args.state), tuple(args.type))
    rows = [{"group": g, "type": t, "state": s, "protocol_type": p} for g, t, s, p in groups]
    if args.json or args.state or args.type:
        _out(args, rows, ["GROUP", "TYPE", "STATE"], ["group", "type", "state"])
    else:
        for r in rows:
            print(r["group"])
    return 0


async def _group_ids(admin: GroupAdmin, args) -> list[str]:
    if getattr(args, "all_groups", False):
        return [g for g, *_ in await admin.list_groups()]
    return list(args.group)


async def _describe(admin: GroupAdmin, args) -> int:
    out: list[dict] = []
    workers: list[dict] = []
    streams: list[dict] = []
    for group in await _group_ids(admin, args):
        d = await admin.describe(group)
        if args.state:
            out.append(_state_row(d))
        elif d.type == "connect":
            workers += [_worker_row(d, m) for m in d.members]
        elif d.type == "streams" and args.members:
            streams += [groups_streams.member_row(group, m) for m in d.members]
        elif args.members:
            out += [{"group": group, "consumer_id": m.member_id, "group_instance_id": m.instance_id,
                     "host": m.host, "client_id": m.client_id, "partitions": sum(map(len, m.assignment.values())),
                     "member_epoch": m.member_epoch, "assignment": _tp_text(m.assignment),
                     "target_assignment": None if m.target is None else _tp_text(m.target)} for m in d.members]
        else:
            out += await _offset_rows(admin, d)
    extra = [(rows, header, keys) for rows, header, keys in (
        (streams, groups_streams.MEMBER_HEADER, groups_streams.MEMBER_KEYS),
        (workers, ["GROUP", "WORKER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "MEMBER-EPOCH", "STATE",
                   "CONNECTORS", "TASKS", "TARGET-CONNECTORS", "TARGET-TASKS"],
         ["group", "worker_id", "group_instance_id", "host", "client_id", "member_epoch", "state", "connectors",
          "tasks", "target_connectors", "target_tasks"])) if rows]
    if args.json and extra:      # one JSON document: streams members and workers follow the other rows
        _out(args, out + [r for rows, _, _ in extra for r in rows], [], [])
        return 0
    if not out and extra:
        pass                     # only streams or connect groups: their tables alone
    elif args.state:
        topology = ["TOPOLOGY-EPOCH"] if any("topology_epoch" in r for r in out) else []
        _out(args, out, ["GROUP", "COORDINATOR (ID)", "TYPE", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                         "ASSIGNMENT-EPOCH", *topology, "#MEMBERS"],
             ["group", "coordinator", "type", "assignment_strategy", "state", "group_epoch", "assignment_epoch",
              *(["topology_epoch"] if topology else []), "members"])
    elif args.members:
        _out(args, out, ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                         "MEMBER-EPOCH", "ASSIGNMENT", "TARGET-ASSIGNMENT"],
             ["group", "consumer_id", "group_instance_id", "host", "client_id", "partitions", "member_epoch",
              "assignment", "target_assignment"])
    else:
        _out(args, out, ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                         "HOST", "CLIENT-ID"],
             ["group", "topic", "partition", "current_offset", "log_end_offset", "lag", "consumer_id", "host",
              "client_id"])
    for i, (rows, header, keys) in enumerate(extra):
        if out or i:
            print()
        _out(args, rows, header, keys)
    return 0


def _worker_row(d: GroupDescription, m) -> dict[str, Any]:
    """A connect worker: its connectors and tasks (`connector/task`), owned and target."""
    def connectors(units: dict[str, list[int]] | None) -> str:
        return ",".join(sorted(c for c, ts in (units or {}).items() if -1 in ts)) or "-"

    def tasks(units: dict[str, list[int]] | None) -> str:
        return ",".join(f"{c}/{t}" for c, ts in sorted((units or {}).items()) for t in ts if t >= 0) or "-"

    return {"group": d.group_id, "worker_id": m.member_id, "group_instance_id": m.instance_id, "host": m.host,
            "client_id": m.client_id, "member_epoch": m.member_epoch, "state": m.state,
            "connectors": connectors(m.assignment), "tasks": tasks(m.assignment),
            "target_connectors": connectors(m.target), "target_tasks": tasks(m.target)}


def _state_row(d: GroupDescription) -> dict[str, Any]:
    coordinator = f"{d.coordinator[1]}:{d.coordinator[2]} ({d.coordinator[0]})" if d.coordinator else None
    row = {"group": d.group_id, "coordinator": coordinator, "type": d.type, "assignment_strategy": d.protocol,
           "state": d.state, "group_epoch": d.group_epoch, "assignment_epoch": d.assignment_epoch,
           "members": len(d.members)}
    if d.type == "streams":
        row["topology_epoch"] = None if d.topology is None else d.topology.epoch
    return row


async def _offset_rows(admin: GroupAdmin, d: GroupDescription) -> list[dict]:
    """kafka-consumer-groups --describe: every assigned or committed partition, with lag."""
    committed = await admin.committed(d.group_id)
    owner: dict[tuple[str, int], Any] = {}
    for m in d.members:
        for topic, parts in m.assignment.items():
            for p in parts:
                owner[(topic, p)] = m
    partitions = sorted(set(committed) | set(owner))
    end = await admin.list_offsets(partitions, LATEST)
    rows = []
    for tp in partitions:
        current = committed.get(tp, (None, ""))[0]
        by = owner.get(tp)
        rows.append({"group": d.group_id, "topic": tp[0], "partition": tp[1], "current_offset": current,
                     "log_end_offset": end.get(tp), "lag": None if current is None else max(0, end[tp] - current),
                     "consumer_id": by.member_id if by else None, "host": by.host if by else None,
                     "client_id": by.client_id if by else None})
    return rows


def _tp_text(assignment: dict[str, list[int]]) -> str:
    return ",".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(assignment.items())) or "-"


async def _reset(admin: GroupAdmin, args) -> int:
    if args.export and args.json:
        raise GroupsError("--export prints CSV: it takes no --json")
    named = list(args.group or [])
    # The user's input is read before any request: a bad file or time asks nothing of the cluster.
    from_file = groups_plan.read_plan_file(args.from_file, named) if args.from_file is not None else None
    at = groups_reset.reset_time(args)
    groups_reset.named_topics(args.topic or [])
    described, failed = [], False
    for group in await _group_ids(admin, args):
        d = await admin.describe(group)
        if args.execute and d.members:
            failed = _error(f"Assignments can only be reset if the group '{group}' is inactive, but the current "
                            f"state is {d.state}.")
        elif from_file is not None and group not in from_file:
            failed = _error(f"No reset plan for group {group} found.")
        else:
            described.append(d)
    if failed and not described:
        return 1                 # nothing to reset: the errors alone, as before a plan
    # Every group's plan before any write: a partition the cluster lacks stops them all.
    plan: groups_plan.Plan = {d.group_id: await groups_reset.targets(admin, args, d, from_file, at) for d in described}
    for group, target in plan.items():
        if args.execute and target:
            await admin.commit(group, target)
    deleted = await _delete_internal_topics(admin, described) if args.execute and args.delete_internal_topics else []
    if args.export:
        # Kafka's tool prints the joined lines with println: a blank line closes the CSV.
        sys.stdout.write(groups_plan.format_plan(plan, with_group=len(named) != 1) + "\n")
        if deleted:
            _out(args, deleted, ["INTERNAL-TOPIC", "STATUS"], ["internal_topic", "status"], file=sys.stderr)
    else:
        rows = [{"group": g, "topic": t, "partition": p, "new_offset": o}
                for g in sorted(plan) for (t, p), o in sorted(plan[g].items())]
        _out_with_topics(args, rows, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                         ["group", "topic", "partition", "new_offset"], deleted)
    return 1 if failed or any(r["status"] != "Deleted" for r in deleted) else 0


def _error(message: str) -> bool:
    print(f"Error: {message}", file=sys.stderr)
    return True


async def _delete_internal_topics(admin: GroupAdmin, described: list[GroupDescription]) -> list[dict]:
    """The streams groups' repartition and changelog topics that exist, deleted: a row each."""
    wanted = sorted({t for d in described if d.topology is not None for t in d.topology.internal_topics()})
    existing = await _existing(admin, wanted) if wanted else set()
    result = await admin.delete_topics(sorted(existing)) if existing else {}
    return [{"internal_topic": t, "status": "Deleted" if code == "none" else f"Error: {code}"}
            for t, code in sorted(result.items())]


def _out_with_topics(args, rows: list[dict], header: list[str], keys: list[str], topics: list[dict]) -> None:
    """A command's rows, then the internal topics it deleted (one JSON document with --json)."""
    if args.json:
        _out(args, rows + topics, header, keys)
        return
    _out(args, rows, header, keys)
    if topics:
        print()
        _out(args, topics, ["INTERNAL-TOPIC", "STATUS"], ["internal_topic", "status"])


async def _existing(admin: GroupAdmin, topics: list[str]) -> set[str]:
    md = await admin.metadata(topics)
    return {str(t.name) for t in md.topics if t.error_code == 0}


async def _delete_offsets(admin: GroupAdmin, args) -> int:
    partitions = await groups_reset.selected_partitions(admin, args, {})
    result = await admin.delete_offsets(args.group, partitions)
    rows = [{"topic": t, "partition": p, "status": "Successful" if code == "none" else f"Error: {code}"}
            for (t, p), code in sorted(result.items())]
    _out(args, rows, ["TOPIC", "PARTITION", "STATUS"], ["topic", "partition", "status"])
    return 0 if all(r["status"] == "Successful" for r in rows) else 1


async def _delete(admin: GroupAdmin, args) -> int:
    groups = await _group_ids(admin, args)
    # The topology names the internal topics: read it before the group is gone.
    described = [await admin.describe(g) for g in groups] if args.delete_internal_topics else []
    result = await admin.delete_groups(groups)
    rows = [{"group": g, "status": "Successful" if code == "none" else f"Error: {code}"}
            for g, code in sorted(result.items())]
    emptied = [d for d in described if d.type == "streams" and result.get(d.group_id) == "none"]
    deleted = await _delete_internal_topics(admin, emptied) if emptied else []
    _out_with_topics(args, rows, ["GROUP", "STATUS"], ["group", "status"], deleted)
    return 0 if all(r["status"] == "Successful" for r in rows) and all(r["status"] == "Deleted" for r in deleted) \
        else 1
