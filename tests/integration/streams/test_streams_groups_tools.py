"""Kafka 4.4's `kafka-streams-groups.sh` (StreamsGroupCommand) and `kcoord groups` on a streams
group served by kcoord in front of Kafka 4.4, compared with the same tool straight against
Kafka 4.4's own streams coordinator (the oracle): the same output, line for line, once the
application id, member ids and the coordinator's address are named alike.

The group is made cheaply with raw StreamsGroupHeartbeat requests (one member, a count with a
repartition topic and a changelog, which the coordinator creates). The scenario runs on both
sides at once, each with its own application id: the tool lists the running group (--list
--state) and describes it (--offsets, --members, --state, all --verbose; --topology), --delete
is refused (NON_EMPTY_GROUP), `kcoord groups` lists and describes it, a raw OffsetDelete of an
input topic is refused (GROUP_SUBSCRIBED_TO_TOPIC); the member leaves; then, on the empty
group, --reset-offsets (dry run; --execute), `kcoord groups reset-offsets --execute` and
`describe`, --delete-offsets and --delete --delete-all-internal-topics, and --list.
"""
from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from support.admin import create_topic
from support.differential import (
    KAFKA_EQUIVALENT,
    Coordinator,
    commit,
    offset_delete,
    set_kafka_group_config,
    streams_changelog_topology,
    wait_for_coordinator,
    wait_knows_topic,
)
from support.kafka_tools import run_tool
from support.kcoord import KcoordProcess
from support.metrics import kcoord_with_metrics, sample
from support.produce import produce_records
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[3]
STREAMS_GROUP_COMMAND = "org.apache.kafka.tools.streams.StreamsGroupCommand"
HEARTBEAT = 88
PARTITIONS = 4
PER_PARTITION = 10
COMMITTED = {0: 3, 1: 5, 2: 7, 3: 9}


@pytest.fixture(scope="module")
def kcoord(kafka44) -> Iterator[KcoordProcess]:
    gateway = kcoord_with_metrics(kafka44.bootstrap, f"__kcoord_sgt_{uuid.uuid4().hex[:8]}",
                                  config=KAFKA_EQUIVALENT).start()
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def source(kafka44, kcoord) -> str:
    name = f"sgt-input-{uuid.uuid4().hex[:8]}"
    create_topic(kafka44.bootstrap, name, PARTITIONS)
    for p in range(PARTITIONS):
        produce_records(kafka44.bootstrap, name, PER_PARTITION, partition=p)
    for side in (Coordinator("kafka", kafka44.bootstrap), Coordinator("kcoord", kcoord.bootstrap)):
        wait_knows_topic(side, name, PARTITIONS)
    return name


# ---------------------------------------------------------------- a raw streams member
class Member:
    """One streams member on StreamsGroupHeartbeat v1 that owns at once what it is given."""

    def __init__(self, side: Coordinator, group: str, member_id: str, process_id: str) -> None:
        self.side, self.group, self.member_id, self.process_id = side, group, member_id, process_id
        self.epoch = 0
        self.tasks: dict[str, tuple] = {"active": (), "standby": (), "warmup": ()}

    def heartbeat(self, top: Any = None, epoch: int | None = None) -> Any:
        t = self.side.types(HEARTBEAT, 1)
        joining = top is not None

        def ids(kind: str):
            return tuple(t.TaskIds(subtopology_id=s, partitions=p) for s, p in self.tasks[kind])
        r = self.side.call(
            HEARTBEAT, 1, group_id=self.group, member_id=self.member_id,
            member_epoch=self.epoch if epoch is None else epoch, endpoint_information_epoch=0, instance_id=None,
            rack_id=None, rebalance_timeout=timedelta(seconds=30 if joining else -0.001), topology=top,
            active_tasks=ids("active"), standby_tasks=ids("standby"), warmup_tasks=ids("warmup"),
            process_id=self.process_id if joining else None,
            user_endpoint=t.Endpoint(host="app-host", port=7070) if joining else None,
            client_tags=() if joining else None, task_offsets=None, task_end_offsets=None,
            shutdown_application=False)
        if int(r.error_code) == 0:
            self.epoch = r.member_epoch
            if r.active_tasks is not None:
                self.tasks = {kind: tuple((i.subtopology_id, tuple(sorted(i.partitions)))
                                          for i in getattr(r, f"{kind}_tasks")) for kind in ("active", "standby",
                                                                                             "warmup")}
        return r

    def active_count(self) -> int:
        return sum(len(p) for _, p in self.tasks["active"])

    @contextlib.contextmanager
    def kept_alive(self) -> Iterator[None]:
        """Heartbeats every second meanwhile (the tools may outlast a session on a busy machine)."""
        done = threading.Event()

        def beat() -> None:
            while not done.wait(1.0):
                self.heartbeat()
        thread = threading.Thread(target=beat, name=f"heartbeat-{self.group}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(30)


def running_group(side: Coordinator, app: str, source: str, member_id: str) -> Member:
    wait_for_coordinator(side, app)
    set_kafka_group_config(side, app, {"streams.initial.rebalance.delay.ms": "0"})
    member = Member(side, app, member_id, "process-1")
    joined = member.heartbeat(streams_changelog_topology(side, app, source))
    assert int(joined.error_code) == 0, joined
    wait_until(lambda: (r := member.heartbeat()) and not r.status and member.active_count() == 2 * PARTITIONS,
               60, 0.2, f"{side.name}: the member runs its {2 * PARTITIONS} tasks")
    assert set(commit(side, app, source, COMMITTED, member_id=member_id, epoch=member.epoch).values()) == {"none"}
    return member


# ---------------------------------------------------------------- the tools
def streams_groups(bootstrap: str, *args: str) -> str:
    """kafka-streams-groups.sh: stdout, stderr (the tool prints its errors to stdout, its notes
    to stderr), then the rc."""
    res = run_tool(STREAMS_GROUP_COMMAND, ["--bootstrap-server", bootstrap, *args])
    return f"{res.stdout}{res.stderr}rc={res.rc}"


def kcoord_groups(bootstrap: str, *args: str) -> str:
    run = subprocess.run([sys.executable, "-m", "coordinator.cli", "groups", *args, "--bootstrap-server", bootstrap,
                          "--json"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"kcoord groups {' '.join(args)} failed ({run.returncode}): {run.stderr}"
    return json.dumps(json.loads(run.stdout), indent=0, sort_keys=True)


def listed(app: str, out: str) -> str:
    """A listing's lines of this group (Kafka 4.4 is the session's: other tests' groups are
    listed there too), its header and its rc; JSON rows of this group."""
    if out.startswith("["):
        return json.dumps([g for g in json.loads(out) if g["group"] == app], indent=0, sort_keys=True)
    return "\n".join(line for line in out.splitlines() if app in line or line.startswith(("GROUP ", "rc=")))


def normalised(out: str, app: str) -> list[str]:
    """The lines, the application id as <app>, the coordinator's address as <coordinator>,
    runs of blanks as one (column widths follow the names), in order: the tool prints rows in
    its HashMap's order, which follows the (different) topic names."""
    out = re.sub(r"[\w.]+:\d+ +\(\d+\)", "<coordinator>", out.replace(app, "<app>"))
    return sorted(re.sub(r" +", " ", line).strip() for line in out.splitlines())


def run_all(runs: dict[str, Any]) -> dict[str, str]:
    """Independent runs (read-only, or on disjoint state) at once: {name: output}."""
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(*run) for name, run in runs.items()}
        return {name: f.result() for name, f in futures.items()}


def running_runs(side: Coordinator, app: str) -> dict[str, Any]:
    """What the tools show of the running group, and --delete refused."""
    at, g = side.address, ("--group", app)
    tool, ours = streams_groups, kcoord_groups
    return {
        "list states": (tool, at, "--list", "--state"),
        "offsets": (tool, at, "--describe", *g, "--offsets", "--verbose"),
        "members": (tool, at, "--describe", *g, "--members", "--verbose"),
        "state": (tool, at, "--describe", *g, "--state", "--verbose"),
        "topology": (tool, at, "--describe", *g, "--topology"),
        "delete while running": (tool, at, "--delete", *g),
        "kcoord list": (ours, at, "list", "--type", "streams"), "kcoord describe": (ours, at, "describe", *g),
        "kcoord members": (ours, at, "describe", *g, "--members"),
        "kcoord state": (ours, at, "describe", *g, "--state"),
    }


def scenario(side: Coordinator, app: str, source: str, member_id: str) -> dict[str, Any]:
    member = running_group(side, app, source, member_id)
    at, g = side.address, ("--group", app)
    tool, ours = streams_groups, kcoord_groups
    with member.kept_alive():
        seen = run_all(running_runs(side, app))
    # Kafka's StreamsGroup never counts a topic as subscribed: deletable while the group runs.
    seen["OffsetDelete while running"] = offset_delete(side, app, source, range(3, 4))
    assert int(member.heartbeat(epoch=-1).error_code) == 0
    topic = ("--input-topic", source)
    steps: list[tuple[str, Any, tuple[str, ...]]] = [
        ("list empty", tool, ("--list", "--state", "Empty")),
        ("reset dry run", tool, ("--reset-offsets", *g, *topic, "--to-earliest", "--dry-run")),
        ("kcoord reset", ours, ("reset-offsets", *g, "--topic", f"{source}:2", "--to-offset", "2", "--execute")),
        ("reset execute", tool, ("--reset-offsets", *g, "--input-topic", f"{source}:0,1", "--to-offset", "4",
                                 "--execute")),
        ("describe empty", ours, ("describe", *g)),
        ("delete offsets", tool, ("--delete-offsets", *g, *topic)),
        ("delete", tool, ("--delete", *g, "--delete-all-internal-topics")),
        ("list after delete", tool, ("--list",)),
    ]
    for name, command, args in steps:
        seen[name] = command(at, *args)
    return {name: listed(app, out) if "list" in name else out for name, out in seen.items()}


def test_kafka_streams_groups_tool_through_kcoord_answers_as_kafka_44(kafka44, kcoord, source):
    suffix = uuid.uuid4().hex[:6]
    apps = {"kafka": f"sgt-{suffix}-kafka", "kcoord": f"sgt-{suffix}-kcrd"}
    member_id = uuid.uuid4().hex[:22]
    sides = (Coordinator("kafka", kafka44.bootstrap), Coordinator("kcoord", kcoord.bootstrap))
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(scenario, s, apps[s.name], source, member_id) for s in sides]
        direct, through = (f.result() for f in futures)
    for name in direct:
        print(f"==== {name}\n--- kafka\n{direct[name]}\n--- kcoord\n{through[name]}")
    # The scenario reached what it is about, on Kafka itself.
    app = apps["kafka"]
    # (the GROUP column is as wide as the longest group on the broker, which other modules share)
    assert re.search(rf"^{app} +Stable$", direct["list states"], re.M) and "process-1" in direct["members"]
    assert "ACTIVE: 0:[0,1,2,3]; 1:[0,1,2,3]" in direct["members"]
    assert f"Streams group '{app}' is not EMPTY." in direct["delete while running"]
    assert direct["OffsetDelete while running"]["topics"][0]["partitions"][0]["error_code"] == \
        "group_subscribed_to_topic"
    assert direct["delete offsets"].count("Successful") == PARTITIONS
    assert f"Deletion of associated internal topics of the streams groups ('{app}') was successful." in \
        direct["delete"]
    assert app not in direct["list after delete"]
    (state,) = json.loads(direct["kcoord state"])
    assert (state["type"], state["state"], state["topology_epoch"], state["members"]) == ("streams", "Stable", 1, 1)
    assert {k: normalised(str(v), apps["kafka"]) for k, v in direct.items()} == \
        {k: normalised(str(v), apps["kcoord"]) for k, v in through.items()}


def test_kcoords_metrics_count_a_running_streams_group(kcoord, source):
    """/metrics with a streams group served: a streams group computes its state, and a scrape
    once failed on it (HTTP 500) for as long as one existed."""
    app = f"sgt-{uuid.uuid4().hex[:6]}-metrics"
    member = running_group(Coordinator("kcoord", kcoord.bootstrap), app, source, uuid.uuid4().hex[:22])
    try:
        samples = kcoord.metrics()
        assert sample(samples, "kcoord_groups", type="streams", state="Stable") >= 1, samples
        assert sample(samples, "kcoord_group_members", type="streams") >= 1
        assert sample(samples, "kafka_server_group_coordinator_metrics_streams_group_count", state="Stable") >= 1
    finally:
        assert int(member.heartbeat(epoch=-1).error_code) == 0
