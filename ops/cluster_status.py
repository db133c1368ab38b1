"""What `kcoord cluster status` finds out about a running kcoord, from the
Kafka protocol and, when given, each instance's Prometheus metrics.

What it asks, and why each answer can be trusted:
- **What it talks to.** Metadata of the state topic: kcoord marks its state topic internal,
  as Kafka marks `__consumer_offsets` (coordinator/protocol/rewrite.py). Without one (the
  default name not listed, and no other internal topic besides Kafka's own) the cluster is
  not kcoord. Coordinator nodes with ids >= NODE_ID_BASE (2**30) in Metadata make it a
  kcoord cluster (one per instance, at its bootstrap address); none: a single process.
- **The shard map.** For each shard (state-topic partition, its count from Metadata), a
  probe group that hashes to it, found by trying `<prefix>0`, `<prefix>1`, ... in order: the
  same names on every run. Only names with a non-negative Java hash are used: for them
  Kafka's placement (`abs(hashCode) % partitions`) and the legacy one a topic an earlier
  kcoord wrote keeps (`(hashCode & 0x7fffffff) % partitions`, coordinator/service/
  partitioner.py) agree, so the probes hit their shard whichever the running kcoord uses.
  FindCoordinator (v4, every probe in one request) is asked of every instance; all must
  name the same node, or the shard is shown as a disagreement. Every instance's Metadata
  must list the same coordinator nodes.
- **A shard's state.** OffsetFetch of its probe group at the named owner (a read; a probe
  group is never created): no error -> active, COORDINATOR_LOAD_IN_PROGRESS -> loading,
  NOT_COORDINATOR -> moving (failed when the owner's metrics say so), and
  COORDINATOR_NOT_AVAILABLE from FindCoordinator -> moving (no owner while it moves).
- **Metrics** (optional): kcoord_cluster_* (generation, node id, lease remaining, shards,
  shard moves), kcoord_shard_fenced_total, kcoord_partition_load_seconds (count and sum),
  kcoord_shard_state. A metrics endpoint is matched to its instance by
  kcoord_cluster_node_id, parsed with prometheus_client's own text parser.
Exit codes (`EXIT_*`): 0 every instance answers and agrees and every shard is active;
2 instances disagree or a listed instance does not answer; 3 they agree but some shard is
not active (loading, moving, failed); 1 the command could not run.
"""
from __future__ import annotations

import asyncio
import re
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as fc_req
from kio.schema.offset_fetch.v8 import request as of_req
from kio.schema.types import GroupId
from kio.static.primitive import i8

from coordinator.cluster.balancer import NODE_ID_BASE
from coordinator.group.hashing import java_string_hash
from coordinator.upstream.client import UpstreamError
from ops.groups_admin import GroupAdmin, GroupsError

DEFAULT_STATE_TOPIC = "__kcoord_offsets"
DEFAULT_STATE_PARTITIONS = 50
DEFAULT_PROBE_PREFIX = "kcoord-status-probe-"
KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

EXIT_OK, EXIT_ERROR, EXIT_DISAGREE, EXIT_NOT_ACTIVE = 0, 1, 2, 3

# Shard states shown (the coordinator runtime's names where they exist).
ACTIVE, LOADING, MOVING, FAILED, UNREACHABLE, UNKNOWN = "active", "loading", "moving", "failed", "unreachable", \
    "unknown"
_UNREACHABLE_ERRORS = (UpstreamError, GroupsError, OSError, TimeoutError)


def error_name(code: ErrorCode | int) -> str:
    """Kafka's spelling of an error code: NOT_COORDINATOR, NONE, ..."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{int(code)}"


# ---------------------------------------------------------------- probe groups
def probe_groups(partitions: int, prefix: str = DEFAULT_PROBE_PREFIX) -> list[str]:
    """One group name per shard (index = shard) that hashes to it: the first of `prefix0`,
    `prefix1`, ... with a non-negative Java hash to land there (module rules: both placements
    agree on it). Deterministic; about 2·N·ln N names are hashed."""
    if partitions <= 0:
        raise ValueError(f"the state topic needs at least one partition, not {partitions}")
    found: list[str | None] = [None] * partitions
    missing = partitions
    limit = 100 * partitions + 10_000
    for i in range(limit):
        name = f"{prefix}{i}"
        h = java_string_hash(name)
        if h < 0:
            continue
        p = h % partitions
        if found[p] is None:
            found[p] = name
            missing -= 1
            if missing == 0:
                return [n for n in found if n is not None]
    raise ValueError(f"no probe group name for {missing} of {partitions} shards after {limit} names")


def ranges(values: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2,5,7-8'; nothing -> '-'."""
    out: list[str] = []
    run: list[int] = []
    for v in sorted(set(values)):
        if run and v == run[-1] + 1:
            run.append(v)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [v]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(out) or "-"


# --------------------------------------------------------------------- metrics
@dataclass
class InstanceMetrics:
    """One instance's /metrics, the part `cluster status` shows (None: not exported)."""
    url: str
    error: str | None = None
    node_id: int | None = None
    generation: int | None = None
    instances: int | None = None
    shards: int | None = None
    moves_in: int | None = None
    moves_out: int | None = None
    lease_remaining_s: float | None = None
    fenced: int | None = None
    loads: int | None = None
    load_seconds_total: float | None = None
    serving: bool | None = None
    shard_states: dict[int, str] = field(default_factory=dict)
    shard_load_s: dict[int, float] = field(default_factory=dict)   # kcoord_partition_last_load_seconds

    @property
    def load_seconds_avg(self) -> float | None:
        if not self.loads or self.load_seconds_total is None:
            return None
        return self.load_seconds_total / self.loads


def parse_metrics(text: str, url: str = "") -> InstanceMetrics:
    """The Prometheus text exposition of one kcoord process, read with prometheus_client's
    parser (counters come as `<name>_total` samples, histograms as `_count` and `_sum`)."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[s.name].append((dict(s.labels), float(s.value)))

    def one(name: str) -> float | None:
        values = samples.get(name)
        return values[0][1] if values else None

    def total(name: str, **labels: str) -> float | None:
        values = [v for lab, v in samples.get(name, []) if all(lab.get(k) == w for k, w in labels.items())]
        return sum(values) if values else None

    def as_int(v: float | None) -> int | None:
        return None if v is None else int(v)

    m = InstanceMetrics(url)
    m.node_id = as_int(one("kcoord_cluster_node_id"))
    if m.node_id is not None and m.node_id < 0:     # a process with no assignment yet
        m.node_id = None
    m.generation = as_int(one("kcoord_cluster_generation"))
    m.instances = as_int(one("kcoord_cluster_instances"))
    m.shards = as_int(one("kcoord_cluster_shards"))
    if "kcoord_cluster_shard_moves_total" in samples or m.generation is not None:
        m.moves_in = as_int(total("kcoord_cluster_shard_moves_total", direction="in")) or 0
        m.moves_out = as_int(total("kcoord_cluster_shard_moves_total", direction="out")) or 0
    m.lease_remaining_s = one("kcoord_cluster_lease_remaining_seconds")
    m.fenced = as_int(one("kcoord_shard_fenced_total"))
    m.loads = as_int(one("kcoord_partition_load_seconds_count"))
    m.load_seconds_total = one("kcoord_partition_load_seconds_sum")
    serving = one("kcoord_serving")
    m.serving = None if serving is None else serving >= 1
    for labels, value in samples.get("kcoord_partition_last_load_seconds", []):
        if labels.get("partition", "").isdigit():
            m.shard_load_s[int(labels["partition"])] = value
    for labels, value in samples.get("kcoord_shard_state", []):
        if value >= 1 and "partition" in labels and "state" in labels:
            try:
                m.shard_states[int(labels["partition"])] = labels["state"]
            except ValueError:
                continue
    return m


def metrics_url(spec: str) -> str:
    """`--metrics-url` as given: a URL, or HOST:PORT (http, /metrics added)."""
    url = spec if "://" in spec else f"http://{spec}"
    scheme, _, rest = url.partition("://")
    if "/" not in rest:
        url = f"{scheme}://{rest}/metrics"
    return url


def metrics_url_for(host: str, port: int) -> str:
    """`--metrics-port P`: every instance serves /metrics on P at its own host."""
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{host}:{port}/metrics"


def scrape(url: str, timeout: float) -> InstanceMetrics:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:    # noqa: S310 (an operator's URL)
            text = r.read().decode("utf-8", "replace")
    except (OSError, ValueError) as e:
        return InstanceMetrics(url, error=str(getattr(e, "reason", None) or e))
    try:
        return parse_metrics(text, url)
    except ValueError as e:
        return InstanceMetrics(url, error=f"not Prometheus text: {e}")


# ---------------------------------------------------------------------- model
@dataclass(frozen=True)
class Answer:
    """One FindCoordinator answer for a probe group."""
    error: str                 # "NONE" or Kafka's error name
    node_id: int = -1
    host: str = ""
    port: int = -1

    @property
    def ok(self) -> bool:
        return self.error == "NONE"

    def text(self) -> str:
        return f"{self.host}:{self.port} ({self.node_id})" if self.ok else self.error


@dataclass
class Instance:
    node_id: int | None        # None: a single process (its coordinators are upstream broker ids)
    host: str
    port: int
    reachable: bool = True
    error: str | None = None
    shards: list[int] = field(default_factory=list)
    coordinator_nodes: list[int] | None = None      # the coordinator nodes its Metadata lists
    metrics: InstanceMetrics | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class Shard:
    shard: int
    probe_group: str
    answers: dict[str, Answer] = field(default_factory=dict)    # instance address -> its answer
    coordinator: Answer | None = None
    agree: bool = True
    state: str = UNKNOWN
    detail: str | None = None          # OffsetFetch's error, or what the metrics said
    load_s: float | None = None        # its last load's duration, from its owner's metrics


@dataclass
class ClusterStatus:
    kind: str                          # "cluster", "single" or "kafka"
    bootstrap: str
    state_topic: str | None = None
    state_partitions: int | None = None
    partitions_from: str | None = None     # "metadata" or "option"
    brokers: list[tuple[int, str, int]] = field(default_factory=list)   # upstream brokers as listed
    instances: list[Instance] = field(default_factory=list)
    shards: list[Shard] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unmatched_metrics: list[InstanceMetrics] = field(default_factory=list)

    @property
    def disagreements(self) -> list[str]:
        out = [f"shard {s.shard}: " + ", ".join(f"{a} says {ans.text()}" for a, ans in sorted(s.answers.items()))
               for s in self.shards if not s.agree]
        views = {i.address: tuple(i.coordinator_nodes) for i in self.instances if i.coordinator_nodes is not None}
        if len(set(views.values())) > 1:
            out.append("Metadata lists different coordinator nodes: " + "; ".join(
                f"{a} lists {', '.join(map(str, v)) or 'none'}" for a, v in sorted(views.items())))
        return out

    @property
    def unreachable(self) -> list[Instance]:
        return [i for i in self.instances if not i.reachable]

    @property
    def exit_code(self) -> int:
        if self.kind == "kafka":
            return EXIT_OK
        if self.disagreements or self.unreachable:
            return EXIT_DISAGREE
        if any(s.state != ACTIVE for s in self.shards):
            return EXIT_NOT_ACTIVE
        return EXIT_OK

    def to_json(self) -> dict[str, Any]:
        def instance(i: Instance) -> dict[str, Any]:
            m = None
            if i.metrics is not None:
                m = asdict(i.metrics)
                m["shard_states"] = {str(k): v for k, v in sorted(i.metrics.shard_states.items())}
                m["shard_load_s"] = {str(k): v for k, v in sorted(i.metrics.shard_load_s.items())}
                m["load_seconds_avg"] = i.metrics.load_seconds_avg
            return {"node_id": i.node_id, "host": i.host, "port": i.port, "address": i.address,
                    "reachable": i.reachable, "error": i.error, "shards": i.shards, "shard_count": len(i.shards),
                    "shard_ranges": ranges(i.shards), "coordinator_nodes": i.coordinator_nodes, "metrics": m}

        def shard(s: Shard) -> dict[str, Any]:
            c = s.coordinator
            return {"shard": s.shard, "probe_group": s.probe_group, "state": s.state, "detail": s.detail,
                    "load_seconds": s.load_s,
                    "agree": s.agree, "coordinator": None if c is None or not c.ok else
                    {"node_id": c.node_id, "host": c.host, "port": c.port},
                    "error": None if c is None or c.ok else c.error,
                    "answers": {a: asdict(ans) for a, ans in sorted(s.answers.items())}}

        return {"kind": self.kind, "bootstrap": self.bootstrap, "state_topic": self.state_topic,
                "state_partitions": self.state_partitions, "partitions_from": self.partitions_from,
                "brokers": [{"node_id": n, "host": h, "port": p} for n, h, p in self.brokers],
                "instances": [instance(i) for i in self.instances], "shards": [shard(s) for s in self.shards],
                "disagreements": self.disagreements, "unreachable": [i.address for i in self.unreachable],
                "notes": self.notes,
                "unmatched_metrics": [{"url": m.url, "error": m.error, "node_id": m.node_id}
                                      for m in self.unmatched_metrics],
                "exit_code": self.exit_code}


# ----------------------------------------------------------------- collecting
@dataclass
class Options:
    bootstrap: str
    state_topic: str | None = None          # None: the default, or the one kcoord marks internal
    state_partitions: int | None = None     # None: from Metadata, else DEFAULT_STATE_PARTITIONS
    probe_prefix: str = DEFAULT_PROBE_PREFIX
    metrics_port: int | None = None
    metrics_urls: tuple[str, ...] = ()
    timeout: float = 10.0


class _Admin(GroupAdmin):
    """GroupAdmin's connections (bootstrap, security, one link per address), with a timeout."""

    def __init__(self, bootstrap: str, security: Any, timeout: float) -> None:
        super().__init__(bootstrap, security, client_id="kcoord-cluster-status")
        self.timeout = timeout

    async def ask(self, request: Any, address: tuple[str, int] | None = None) -> Any:
        link = await self._link(address)
        return await link.request(request, self.timeout)


async def collect(opts: Options, security: Any = None) -> ClusterStatus:
    """The status of the kcoord (or Kafka) at `opts.bootstrap`; raises GroupsError or
    UpstreamError when the bootstrap does not answer."""
    admin = _Admin(opts.bootstrap, security, opts.timeout)
    async with admin:
        status = ClusterStatus("kafka", opts.bootstrap)
        await _identify(admin, opts, status)
        if status.kind == "kafka":
            return status
        assert status.state_partitions is not None
        probes = probe_groups(status.state_partitions, opts.probe_prefix)
        status.shards = [Shard(p, g) for p, g in enumerate(probes)]
        await asyncio.gather(*(_ask_instance(admin, status, i, probes) for i in status.instances))
        _agree(status)
        await _shard_states(admin, status)
        await _metrics(opts, status)
        _refine(status)
        return status


async def _identify(admin: _Admin, opts: Options, status: ClusterStatus) -> None:
    """kind, state topic and partitions, brokers and instances, from the bootstrap's Metadata."""
    topic = opts.state_topic or DEFAULT_STATE_TOPIC
    try:
        md = await admin.metadata([topic])
    except (UpstreamError, OSError, TimeoutError) as e:
        raise GroupsError(f"no answer from {opts.bootstrap}: {_why(e)}") from e
    entry = next((t for t in md.topics if t.name == topic), None)
    found = entry is not None and entry.error_code == ErrorCode.none
    internal = found and entry is not None and bool(entry.is_internal)
    if not internal and opts.state_topic is None:
        # Another state topic name: the one internal topic that is not Kafka's.
        everything = await admin.metadata(None)
        ours = [t for t in everything.topics if t.is_internal and t.name not in KAFKA_INTERNAL_TOPICS]
        if len(ours) == 1:
            md, entry, found, internal = everything, ours[0], True, True
            topic = str(entry.name)
            status.notes.append(f"state topic {topic}: the one internal topic that is not Kafka's own "
                                f"(no {DEFAULT_STATE_TOPIC}; --state-topic names it)")
    nodes = sorted((int(b.node_id), b.host, int(b.port)) for b in md.brokers)
    coordinators = [n for n in nodes if n[0] >= NODE_ID_BASE]
    status.brokers = [n for n in nodes if n[0] < NODE_ID_BASE]
    kcoord = internal or bool(coordinators)
    if not kcoord:
        status.kind = "kafka"
        if found:
            status.notes.append(f"{topic} is an ordinary topic here, not internal as kcoord lists its state "
                                f"topic: this is Apache Kafka (kcoord's upstream?)")
        else:
            status.notes.append(f"no internal state topic {topic} and no kcoord coordinator node (node id >= "
                                f"{NODE_ID_BASE}) in Metadata: this is Apache Kafka or another broker")
        return
    status.state_topic = topic
    if found and entry is not None and entry.partitions:
        status.state_partitions, status.partitions_from = len(entry.partitions), "metadata"
        if opts.state_partitions is not None and opts.state_partitions != status.state_partitions:
            status.notes.append(f"--state-partitions {opts.state_partitions} ignored: Metadata lists "
                                f"{status.state_partitions} partitions of {topic}")
    else:
        status.state_partitions = opts.state_partitions or DEFAULT_STATE_PARTITIONS
        status.partitions_from = "option"
        status.notes.append(f"{topic} not listed: {status.state_partitions} shards assumed (--state-partitions)")
    if coordinators:
        status.kind = "cluster"
        status.instances = [Instance(n, h, p) for n, h, p in coordinators]
    else:
        status.kind = "single"
        link = await admin._link()
        host, port = link.address
        status.instances = [Instance(None, host, port)]


async def _ask_instance(admin: _Admin, status: ClusterStatus, inst: Instance, probes: list[str]) -> None:
    """The instance's Metadata (its coordinator nodes) and its FindCoordinator answers."""
    where = (inst.host, inst.port)
    try:
        if status.kind == "cluster":
            md = await admin.ask(_metadata_request(status.state_topic), where)
            inst.coordinator_nodes = sorted(int(b.node_id) for b in md.brokers if int(b.node_id) >= NODE_ID_BASE)
        resp = await admin.ask(fc_req.FindCoordinatorRequest(key_type=i8(0), coordinator_keys=tuple(probes)), where)
    except _UNREACHABLE_ERRORS as e:
        inst.reachable, inst.error = False, _why(e)
        return
    by_key = {c.key: c for c in resp.coordinators}
    for s in status.shards:
        c = by_key.get(s.probe_group)
        s.answers[inst.address] = Answer("NO_ANSWER") if c is None else \
            Answer(error_name(c.error_code), int(c.node_id), c.host, int(c.port))


def _why(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    prefix = "no upstream broker reachable: "     # UpstreamClient.connect's words, for a kcoord instance
    text = text[len(prefix):] if text.startswith(prefix) else text
    return re.sub(r"^\S+:\d+: ", "", text)        # its address, shown beside it anyway


def _metadata_request(topic: str | None) -> Any:
    from kio.schema.metadata.v7 import request as md_req
    from kio.schema.types import TopicName
    return md_req.MetadataRequest(topics=None if topic is None else (md_req.MetadataRequestTopic(
        name=TopicName(topic)),), allow_auto_topic_creation=False)


def _agree(status: ClusterStatus) -> None:
    """Each shard's coordinator: what every instance that answered says, or, if they
    differ, the most common answer (the shard is then marked as a disagreement)."""
    by_node = {i.node_id: i for i in status.instances if i.node_id is not None}
    for s in status.shards:
        answers = list(s.answers.values())
        if not answers:
            s.state, s.detail = UNREACHABLE, "no instance answered FindCoordinator"
            continue
        counts = Counter(answers)
        s.coordinator = counts.most_common(1)[0][0]
        s.agree = len(counts) == 1
        if s.coordinator.ok and s.coordinator.node_id in by_node:
            by_node[s.coordinator.node_id].shards.append(s.shard)
    if status.kind == "single":
        (only,) = status.instances
        only.shards = [s.shard for s in status.shards if s.coordinator is not None and s.coordinator.ok]


async def _shard_states(admin: _Admin, status: ClusterStatus) -> None:
    """OffsetFetch of each probe group at its owner, one request per owner."""
    by_owner: dict[tuple[str, int], list[Shard]] = defaultdict(list)
    silent = {(i.host, i.port) for i in status.unreachable}
    for s in status.shards:
        c = s.coordinator
        if c is None:
            continue
        if not c.ok:
            s.state, s.detail = (MOVING if c.error == "COORDINATOR_NOT_AVAILABLE" else UNKNOWN), \
                f"FindCoordinator: {c.error}"
            continue
        if (c.host, c.port) in silent:
            s.state, s.detail = UNREACHABLE, "its owner does not answer"
            continue
        by_owner[(c.host, c.port)].append(s)

    async def fetch(owner: tuple[str, int], shards: list[Shard]) -> None:
        request = of_req.OffsetFetchRequest(groups=tuple(
            of_req.OffsetFetchRequestGroup(group_id=GroupId(s.probe_group), topics=None) for s in shards),
            require_stable=False)
        try:
            resp = await admin.ask(request, owner)
        except _UNREACHABLE_ERRORS as e:
            for s in shards:
                s.state, s.detail = UNREACHABLE, f"owner {owner[0]}:{owner[1]}: {_why(e)}"
            return
        codes = {str(g.group_id): error_name(g.error_code) for g in resp.groups}
        for s in shards:
            code = codes.get(s.probe_group, "NO_ANSWER")
            s.state = {"NONE": ACTIVE, "COORDINATOR_LOAD_IN_PROGRESS": LOADING, "NOT_COORDINATOR": MOVING,
                       "COORDINATOR_NOT_AVAILABLE": MOVING}.get(code, UNKNOWN)
            s.detail = None if code == "NONE" else f"OffsetFetch: {code}"

    await asyncio.gather(*(fetch(owner, shards) for owner, shards in by_owner.items()))


async def _metrics(opts: Options, status: ClusterStatus) -> None:
    urls: list[str] = [metrics_url(u) for u in opts.metrics_urls]
    if opts.metrics_port is not None:
        urls += [metrics_url_for(i.host, opts.metrics_port) for i in status.instances]
    if not urls:
        return
    scraped = await asyncio.gather(*(asyncio.to_thread(scrape, u, opts.timeout) for u in dict.fromkeys(urls)))
    by_node = {i.node_id: i for i in status.instances}
    by_url = {metrics_url_for(i.host, opts.metrics_port): i for i in status.instances} \
        if opts.metrics_port is not None else {}
    for m in scraped:
        inst = by_node.get(m.node_id) if m.node_id is not None else None
        if inst is None and status.kind == "single" and m.error is None and m.node_id is None:
            inst = status.instances[0]          # a single process exports no node id
        if inst is None:
            inst = by_url.get(m.url)            # --metrics-port: the URL names the instance
        if inst is None or (inst.metrics is not None and inst.metrics.error is None):
            status.unmatched_metrics.append(m)
            continue
        inst.metrics = m
    for m in status.unmatched_metrics:
        why = m.error or (f"node id {m.node_id} is not a listed instance" if m.node_id is not None
                          else "no kcoord_cluster_node_id")
        status.notes.append(f"metrics {m.url}: {why}")


def _refine(status: ClusterStatus) -> None:
    """What the owners' metrics add: a shard NOT_COORDINATOR that its owner reports failed;
    metrics that disagree with the protocol's map (noted, not an error: scraped later)."""
    by_node = {i.node_id: i for i in status.instances}
    for s in status.shards:
        c = s.coordinator
        owner = by_node.get(c.node_id) if c is not None and c.ok else None
        if status.kind == "single":
            owner = status.instances[0]
        m = owner.metrics if owner is not None else None
        if m is None or m.error is not None:
            continue
        s.load_s = m.shard_load_s.get(s.shard)
        said = m.shard_states.get(s.shard)
        if s.state == MOVING and said == FAILED:
            s.state = FAILED
            s.detail = f"{s.detail}; its owner's metrics: failed" if s.detail else "its owner's metrics: failed"
    for i in status.instances:
        m = i.metrics
        if m is None or m.error is not None or status.kind != "cluster":
            continue
        if m.shards is not None and m.shards != len(i.shards):
            status.notes.append(f"{i.address} reports {m.shards} shards (kcoord_cluster_shards); "
                                f"FindCoordinator names it for {len(i.shards)}")
        if m.instances is not None and m.instances != len(status.instances):
            status.notes.append(f"{i.address} counts {m.instances} instances (kcoord_cluster_instances); "
                                f"Metadata lists {len(status.instances)}")
    generations = {i.metrics.generation for i in status.instances
                   if i.metrics is not None and i.metrics.generation is not None}
    if len(generations) > 1:
        status.notes.append("instances report different generations: " + ", ".join(map(str, sorted(generations))))


# ------------------------------------------------------------------- rendering
def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """kafka-consumer-groups' layout: left-aligned columns, one space between, '-' for none."""
    cells = [header] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return [" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


def _seconds(v: float | None) -> str | None:
    if v is None:
        return None
    return f"{v:.3f}s" if v < 10 else f"{v:.1f}s"


def render(status: ClusterStatus) -> str:
    lines: list[str] = []
    if status.kind == "kafka":
        lines.append(f"{status.bootstrap} is not kcoord: " + "; ".join(status.notes))
        if status.brokers:
            lines.append("")
            lines += table(["NODE-ID", "HOST:PORT"], [[n, f"{h}:{p}"] for n, h, p in status.brokers])
        return "\n".join(lines) + "\n"

    n_shards = len(status.shards)
    held = {s for i in status.instances for s in i.shards}
    generations = sorted({i.metrics.generation for i in status.instances
                          if i.metrics is not None and i.metrics.generation is not None})
    if status.kind == "cluster":
        head = f"kcoord cluster: {len(status.instances)} instances, {n_shards} shards"
    else:
        head = f"kcoord single process: {n_shards} shards"
    head += f" (state topic {status.state_topic}), {len(held)} held"
    if generations:
        head += f", generation {'/'.join(map(str, generations))}"
    lines.append(head)

    rows = []
    for i in status.instances:
        m = i.metrics if i.metrics is not None and i.metrics.error is None else None
        lease = None if m is None or m.lease_remaining_s is None else _seconds(max(0.0, m.lease_remaining_s))
        moves = None if m is None or m.moves_in is None else f"{m.moves_in}/{m.moves_out}"
        state = "up" if i.reachable else "UNREACHABLE"
        if m is not None and m.serving is False:
            state = "NOT-SERVING"
        rows.append([i.node_id if i.node_id is not None else "(single)", i.address, state, len(i.shards),
                     ranges(i.shards), None if m is None else m.generation, lease,
                     None if m is None else m.fenced, moves, None if m is None else m.loads,
                     None if m is None else _seconds(m.load_seconds_avg)])
    lines.append("")
    lines += table(["NODE-ID", "HOST:PORT", "STATUS", "#SHARDS", "SHARDS", "GENERATION", "LEASE-LEFT", "FENCED",
                    "MOVES-IN/OUT", "LOADS", "LOAD-TIME-AVG"], rows)

    lines.append("")
    lines += table(["SHARD", "PROBE-GROUP", "COORDINATOR (ID)", "AGREE", "STATE", "LOAD-TIME", "DETAIL"],
                   [[s.shard, s.probe_group, None if s.coordinator is None else s.coordinator.text(),
                     "yes" if s.agree else "NO", s.state, None if s.load_s is None else _seconds(s.load_s), s.detail]
                    for s in status.shards])

    problems = status.disagreements
    if problems or status.unreachable:
        lines.append("")
        lines += [f"Disagreement: {d}" for d in problems]
        lines += [f"Unreachable: {i.address} ({i.node_id}): {i.error}" for i in status.unreachable]
    not_active = Counter(s.state for s in status.shards if s.state != ACTIVE)
    if status.notes or not_active:
        lines.append("")
        if not_active:
            lines.append("Not active: " + ", ".join(f"{n} {state}" for state, n in sorted(not_active.items())))
        lines += [f"Note: {n}" for n in status.notes]
    return "\n".join(lines) + "\n"
