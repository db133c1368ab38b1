"""`kcoord cluster status` (issue 15 §2) without a broker: the probe-group search, the ranges
and tables, the metrics parser (against the names kcoord registers), and `collect` against a
scripted cluster: agreement, a disagreement, an instance that does not answer, shards
loading or moving, a single process, Apache Kafka; the exit code of each."""
from __future__ import annotations

import argparse
import asyncio
from types import SimpleNamespace

import orjson
import pytest
from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from coordinator.cluster.balancer import NODE_ID_BASE
from coordinator.group.hashing import java_string_hash, legacy_partition_for, partition_for
from coordinator.upstream.client import UpstreamError
from ops import cluster_cli, cluster_status
from ops.cluster_status import (
    EXIT_DISAGREE,
    EXIT_NOT_ACTIVE,
    EXIT_OK,
    InstanceMetrics,
    Options,
    collect,
    metrics_url,
    metrics_url_for,
    parse_metrics,
    probe_groups,
    ranges,
    render,
    table,
)


# ---------------------------------------------------------------- probe groups
@pytest.mark.parametrize("partitions", [1, 2, 12, 50, 1000])
def test_each_probe_group_hashes_to_its_shard(partitions):
    probes = probe_groups(partitions)
    assert len(probes) == partitions == len(set(probes))
    assert [partition_for(g, partitions) for g in probes] == list(range(partitions))
    # ... under the legacy placement too (a topic an earlier kcoord wrote keeps it).
    assert [legacy_partition_for(g, partitions) for g in probes] == list(range(partitions))


def test_probe_groups_are_the_first_names_to_land_on_each_shard():
    probes = probe_groups(12, "p-")
    assert probes == probe_groups(12, "p-")            # the same on every run
    for shard, name in enumerate(probes):
        i = int(name.removeprefix("p-"))
        assert all(java_string_hash(f"p-{j}") < 0 or partition_for(f"p-{j}", 12) != shard for j in range(i)), name
    assert probe_groups(50)[:3] == probe_groups(50)[:3] and probe_groups(50, "x-") != probe_groups(50)


def test_no_probe_for_no_partitions():
    with pytest.raises(ValueError):
        probe_groups(0)


def test_ranges():
    assert ranges([]) == "-"
    assert ranges([3]) == "3"
    assert ranges([5, 0, 1, 2, 7, 8, 2]) == "0-2,5,7-8"
    assert ranges(range(50)) == "0-49"


def test_table_is_kafka_consumer_groups_layout():
    assert table(["GROUP", "TOPIC", "LAG"], [["g", "orders", 10], ["longer-group", None, 0]]) == [
        "GROUP        TOPIC  LAG",
        "g            orders 10",
        "longer-group -      0",
    ]


def test_metrics_urls():
    assert metrics_url("10.0.0.7:9404") == "http://10.0.0.7:9404/metrics"
    assert metrics_url("https://kc-0.kcoord:9404/metrics") == "https://kc-0.kcoord:9404/metrics"
    assert metrics_url("http://h:1/custom") == "http://h:1/custom"
    assert metrics_url_for("kc-1.kcoord.ns.svc", 9404) == "http://kc-1.kcoord.ns.svc:9404/metrics"
    assert metrics_url_for("::1", 9404) == "http://[::1]:9404/metrics"


# --------------------------------------------------------------------- metrics
def _exposition(node_id: int = NODE_ID_BASE + 1, shards: dict[int, str] | None = None) -> str:
    """What a kcoord instance exports, built with the names and types kcoord registers."""
    r = CollectorRegistry()
    Gauge("kcoord_cluster_generation", "", registry=r).set(7)
    Gauge("kcoord_cluster_instances", "", registry=r).set(3)
    Gauge("kcoord_cluster_shards", "", registry=r).set(len(shards or {}))
    moves = Counter("kcoord_cluster_shard_moves_total", "", ["direction"], registry=r)
    moves.labels(direction="in").inc(6)
    moves.labels(direction="out").inc(2)
    Gauge("kcoord_cluster_node_id", "", registry=r).set(node_id)
    Gauge("kcoord_cluster_lease_remaining_seconds", "", registry=r).set(2.5)
    Counter("kcoord_shard_fenced_total", "", registry=r).inc(1)
    load = Histogram("kcoord_partition_load_seconds", "", registry=r)
    for v in (0.1, 0.3):
        load.observe(v)
    state = Gauge("kcoord_shard_state", "", ["partition", "state"], registry=r)
    for p, s in (shards or {}).items():
        for other in ("loading", "active", "failed"):
            state.labels(partition=str(p), state=other).set(1 if other == s else 0)
    return generate_latest(r).decode()


def test_parse_metrics():
    m = parse_metrics(_exposition(shards={0: "active", 1: "active", 4: "failed", 5: "loading"}), "u")
    assert (m.url, m.error, m.node_id, m.generation, m.instances, m.shards) == ("u", None, NODE_ID_BASE + 1, 7, 3, 4)
    assert (m.moves_in, m.moves_out, m.lease_remaining_s, m.fenced, m.loads) == (6, 2, 2.5, 1, 2)
    assert m.load_seconds_total == pytest.approx(0.4) and m.load_seconds_avg == pytest.approx(0.2)
    assert m.shard_states == {0: "active", 1: "active", 4: "failed", 5: "loading"}


def test_parse_metrics_of_a_single_process():
    r = CollectorRegistry()
    Counter("kcoord_shard_fenced_total", "", registry=r)
    m = parse_metrics(generate_latest(r).decode())
    assert m.node_id is None and m.generation is None and m.moves_in is None and m.fenced == 0
    assert m.load_seconds_avg is None


def test_the_parsed_names_are_the_ones_kcoord_registers():
    from prometheus_client import REGISTRY

    import coordinator.clustered  # noqa: F401  (registers the kcoord_cluster_* metrics)

    families = {f.name for f in text_string_to_metric_families(generate_latest(REGISTRY).decode())}
    for name in ("kcoord_cluster_generation", "kcoord_cluster_instances", "kcoord_cluster_shards",
                 "kcoord_cluster_shard_moves", "kcoord_cluster_node_id", "kcoord_cluster_lease_remaining_seconds",
                 "kcoord_shard_fenced", "kcoord_partition_load_seconds", "kcoord_shard_state"):
        assert name in families, name


# ----------------------------------------------------- collect, on a script
N = 6
A, B, C = ("10.0.0.1", 9092), ("10.0.0.2", 9092), ("10.0.0.3", 9092)
NODES = {A: NODE_ID_BASE, B: NODE_ID_BASE + 1, C: NODE_ID_BASE + 2}


class World:
    """A scripted kcoord: who answers, what each instance says owns each shard, and what
    OffsetFetch answers at the owner. `kind`: "cluster", "single" or "kafka"."""

    def __init__(self, kind: str = "cluster") -> None:
        self.kind = kind
        self.n = N
        self.instances = dict(NODES) if kind == "cluster" else {}
        self.owner = {s: [A, B, C][s % 3] for s in range(N)}    # shard -> owner address (None: moving)
        self.views: dict[tuple[str, int], dict[int, tuple[str, int] | None]] = {}   # per-instance overrides
        self.listed: dict[tuple[str, int], list[tuple[str, int]]] = {}               # Metadata overrides
        self.silent: set[tuple[str, int]] = set()
        self.offset_errors: dict[int, ErrorCode] = {}
        self.state_topic_internal = kind != "kafka"
        self.requests: list[tuple[str, tuple[str, int] | None]] = []

    def metadata(self, at: tuple[str, int] | None, topics):
        listed = self.listed.get(at, list(self.instances)) if at else list(self.instances)
        brokers = [SimpleNamespace(node_id=1, host="kafka-1", port=9093)] + [
            SimpleNamespace(node_id=self.instances[a], host=a[0], port=a[1]) for a in listed]
        names = ["__kcoord_offsets"] if topics is None or "__kcoord_offsets" in topics else topics
        return SimpleNamespace(brokers=brokers, topics=[SimpleNamespace(
            name=t, error_code=ErrorCode.none, is_internal=self.state_topic_internal,
            partitions=[object()] * self.n) for t in names])


class FakeAdmin:
    world: World

    def __init__(self, bootstrap, security, timeout) -> None:
        self.bootstrap = bootstrap

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return None

    async def metadata(self, topics=None):
        return self.world.metadata(None, topics)

    async def _link(self, address=None):
        return SimpleNamespace(address=("127.0.0.1", 29650))

    async def ask(self, request, address=None):
        w = self.world
        w.requests.append((type(request).__name__, address))
        if address in w.silent:
            raise UpstreamError(f"{address[0]}:{address[1]}: [Errno 111] Connection refused")
        name = type(request).__name__
        if name == "MetadataRequest":
            return w.metadata(address, [t.name for t in request.topics])
        if name == "FindCoordinatorRequest":
            coordinators = []
            for key in request.coordinator_keys:
                shard = partition_for(key, w.n)
                owner = w.views.get(address, {}).get(shard, w.owner[shard])
                if w.kind == "single":
                    coordinators.append(SimpleNamespace(key=key, node_id=1, host="127.0.0.1", port=29651,
                                                        error_code=ErrorCode.none))
                elif owner is None:
                    coordinators.append(SimpleNamespace(key=key, node_id=-1, host="", port=-1,
                                                        error_code=ErrorCode.coordinator_not_available))
                else:
                    coordinators.append(SimpleNamespace(key=key, node_id=NODES[owner], host=owner[0], port=owner[1],
                                                        error_code=ErrorCode.none))
            return SimpleNamespace(coordinators=coordinators)
        if name == "OffsetFetchRequest":
            return SimpleNamespace(groups=[SimpleNamespace(
                group_id=g.group_id, error_code=w.offset_errors.get(partition_for(g.group_id, w.n), ErrorCode.none))
                for g in request.groups])
        raise AssertionError(name)


@pytest.fixture
def world(monkeypatch):
    w = World()
    FakeAdmin.world = w
    monkeypatch.setattr(cluster_status, "_Admin", FakeAdmin)
    return w


def run(**options):
    return asyncio.run(collect(Options("127.0.0.1:29650", **options)))


def test_an_agreed_cluster(world):
    st = run()
    assert st.kind == "cluster" and st.state_topic == "__kcoord_offsets" and st.state_partitions == N
    assert st.partitions_from == "metadata" and st.brokers == [(1, "kafka-1", 9093)]
    assert {i.node_id: i.shards for i in st.instances} == {NODE_ID_BASE: [0, 3], NODE_ID_BASE + 1: [1, 4],
                                                           NODE_ID_BASE + 2: [2, 5]}
    assert all(s.agree and s.state == "active" for s in st.shards)
    assert st.disagreements == [] and st.exit_code == EXIT_OK
    # every instance was asked FindCoordinator, once, for every probe in one request
    asked = [a for name, a in world.requests if name == "FindCoordinatorRequest"]
    assert sorted(asked) == sorted(NODES)
    text = render(st)
    assert text.startswith("kcoord cluster: 3 instances, 6 shards (state topic __kcoord_offsets), 6 held\n")
    assert f"{NODE_ID_BASE} 10.0.0.1:9092 up     2       0,3" in text
    doc = orjson.loads(orjson.dumps(st.to_json()))
    assert doc["exit_code"] == 0 and [s["coordinator"]["node_id"] for s in doc["shards"]] == [
        NODES[world.owner[s]] for s in range(N)]


def test_a_disagreement_is_shown_and_exits_2(world):
    world.views[C] = {1: C}            # C thinks it owns shard 1, which A and B give to B
    st = run()
    (bad,) = [s for s in st.shards if not s.agree]
    assert bad.shard == 1 and bad.coordinator is not None and bad.coordinator.node_id == NODES[B]   # the majority
    assert st.exit_code == EXIT_DISAGREE
    assert st.disagreements == [f"shard 1: 10.0.0.1:9092 says 10.0.0.2:9092 ({NODE_ID_BASE + 1}), 10.0.0.2:9092 "
                                f"says 10.0.0.2:9092 ({NODE_ID_BASE + 1}), 10.0.0.3:9092 says 10.0.0.3:9092 "
                                f"({NODE_ID_BASE + 2})"]
    text = render(st)
    assert "Disagreement: shard 1: " in text and " NO    active" in text
    assert orjson.loads(orjson.dumps(st.to_json()))["disagreements"] == st.disagreements


def test_metadata_that_lists_other_instances_is_a_disagreement(world):
    world.listed[C] = [A, C]
    st = run()
    assert all(s.agree for s in st.shards) and st.exit_code == EXIT_DISAGREE
    assert st.disagreements[0].startswith("Metadata lists different coordinator nodes")


def test_an_instance_that_does_not_answer(world):
    world.silent.add(C)
    st = run()
    assert [i.address for i in st.unreachable] == ["10.0.0.3:9092"] and st.exit_code == EXIT_DISAGREE
    assert [s.state for s in st.shards] == ["active", "active", "unreachable"] * 2
    assert [s.detail for s in st.shards][2] == "its owner does not answer"
    assert "Unreachable: 10.0.0.3:9092" in render(st) and " UNREACHABLE " in render(st)


def test_loading_moving_and_failed_shards_exit_3(world, monkeypatch):
    world.owner[3] = None                                       # moving: no owner
    world.offset_errors = {1: ErrorCode.coordinator_load_in_progress, 2: ErrorCode.not_coordinator,
                           5: ErrorCode.not_coordinator}
    failed = InstanceMetrics("http://10.0.0.3:9404/metrics", node_id=NODE_ID_BASE + 2, generation=4, shards=2,
                             instances=3, shard_states={2: "active", 5: "failed"})
    monkeypatch.setattr(cluster_status, "scrape", lambda url, timeout: failed if "10.0.0.3" in url else
                        InstanceMetrics(url, error="connection refused"))
    st = run(metrics_port=9404)
    assert [s.state for s in st.shards] == ["active", "loading", "moving", "moving", "active", "failed"]
    assert st.shards[3].detail == "FindCoordinator: COORDINATOR_NOT_AVAILABLE"
    assert st.shards[5].detail == "OffsetFetch: NOT_COORDINATOR; its owner's metrics: failed"
    assert st.exit_code == EXIT_NOT_ACTIVE
    assert "Not active: 1 failed, 1 loading, 2 moving" in render(st)
    # --metrics-port: each instance's host at that port; a failed scrape stays with its instance
    by_node = {i.node_id: i.metrics for i in st.instances}
    assert by_node[NODE_ID_BASE + 2] is failed
    assert by_node[NODE_ID_BASE].error == "connection refused" and st.unmatched_metrics == []


def test_metrics_urls_are_matched_by_node_id(world, monkeypatch):
    texts = {f"http://m{n}/metrics": _exposition(NODE_ID_BASE + n, {s: "active" for s in range(n, N, 3)})
             for n in range(3)}
    texts["http://dead/metrics"] = None

    def scrape(url, timeout):
        text = texts[url]
        return InstanceMetrics(url, error="connection refused") if text is None else parse_metrics(text, url)

    monkeypatch.setattr(cluster_status, "scrape", scrape)
    st = run(metrics_urls=("http://m2/metrics", "m0", "http://m1/metrics", "dead"))
    assert {i.node_id: i.metrics.url for i in st.instances if i.metrics} == {
        NODE_ID_BASE + n: f"http://m{n}/metrics" for n in range(3)}
    assert st.notes == ["metrics http://dead/metrics: connection refused"] and st.exit_code == EXIT_OK
    row = next(line for line in render(st).splitlines() if line.startswith(str(NODE_ID_BASE)))
    assert row.split() == [str(NODE_ID_BASE), "10.0.0.1:9092", "up", "2", "0,3", "7", "2.500s", "1", "6/2", "2",
                           "0.200s"]


def test_metrics_that_disagree_with_the_map_are_noted(world, monkeypatch):
    monkeypatch.setattr(cluster_status, "scrape", lambda url, timeout: parse_metrics(
        _exposition(NODE_ID_BASE, {0: "active"}), url))
    st = run(metrics_urls=("m0",))
    assert st.notes == ["10.0.0.1:9092 reports 1 shards (kcoord_cluster_shards); FindCoordinator names it for 2"]
    assert st.exit_code == EXIT_OK


def test_a_single_process(world):
    world.kind, world.instances = "single", {}
    st = run()
    assert st.kind == "single" and [(i.node_id, i.address, i.shards) for i in st.instances] == [
        (None, "127.0.0.1:29650", list(range(N)))]
    assert st.exit_code == EXIT_OK
    assert render(st).startswith("kcoord single process: 6 shards (state topic __kcoord_offsets), 6 held\n")
    assert "(single) 127.0.0.1:29650 up     6       0-5" in render(st)


@pytest.mark.parametrize("named", [False, True])
def test_apache_kafka_is_not_kcoord(world, named):
    world.kind, world.instances, world.state_topic_internal = "kafka", {}, False
    st = run(state_topic="__kcoord_offsets" if named else None)
    assert st.kind == "kafka" and st.exit_code == EXIT_OK and st.shards == []
    assert render(st).startswith("127.0.0.1:29650 is not kcoord: __kcoord_offsets is an ordinary topic here")
    assert orjson.loads(orjson.dumps(st.to_json()))["kind"] == "kafka"


def test_the_partition_count_falls_back_to_the_option(world):
    world.metadata = lambda at, topics: SimpleNamespace(        # no state topic listed, but kcoord nodes
        brokers=[SimpleNamespace(node_id=n, host=a[0], port=a[1]) for a, n in NODES.items()],
        topics=[SimpleNamespace(name=t, error_code=ErrorCode.unknown_topic_or_partition, is_internal=False,
                                partitions=[]) for t in (topics or [])])
    world.n, world.owner = 4, {s: [A, B, C][s % 3] for s in range(4)}
    st = run(state_topic="__kcoord_offsets", state_partitions=4)
    assert st.kind == "cluster" and st.state_partitions == 4 and st.partitions_from == "option"
    assert len(st.shards) == 4 and st.exit_code == EXIT_OK


# ------------------------------------------------------------------------ CLI
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kcoord")
    cluster_cli.register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_the_cli_registers_cluster_status():
    args = _parser().parse_args(["cluster", "status", "--bootstrap-server", "h:1", "--metrics-url", "a:1",
                                 "--metrics-url", "b:2", "--json"])
    assert (args.bootstrap_server, args.metrics_url, args.metrics_port, args.json) == ("h:1", ["a:1", "b:2"],
                                                                                        None, True)
    assert (args.state_topic, args.state_partitions, args.timeout) == (None, None, 10.0)
    with pytest.raises(SystemExit):
        _parser().parse_args(["cluster", "status", "--bootstrap-server", "h:1", "--metrics-port", "1",
                              "--metrics-url", "a:1"])


def test_the_cli_exit_code_and_json(world, capsys):
    world.views[C] = {1: C}
    args = _parser().parse_args(["cluster", "status", "--bootstrap-server", "h:1", "--json"])
    assert args.func(args) == EXIT_DISAGREE
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["kind"] == "cluster" and doc["exit_code"] == EXIT_DISAGREE and len(doc["disagreements"]) == 1


def test_the_cli_says_when_the_bootstrap_does_not_answer(capsys):
    args = _parser().parse_args(["cluster", "status", "--bootstrap-server", "127.0.0.1:1", "--timeout", "1"])
    assert args.func(args) == 1
    assert capsys.readouterr().err.startswith("Error: no answer from 127.0.0.1:1")
