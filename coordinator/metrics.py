"""Prometheus metrics of a running coordinator (`kcoord serve --metrics-port`).

Rules: metrics are module-level (one registry per process); the request path only bumps
children it has cached; shard-state gauges change on state transitions, never per request.
This module sits at the bottom of the house beside `protocol/` (it imports nothing of
kcoord's but `records`), so the gateway, the runtime, the service and the cluster shell all
count into it without importing each other.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily

from records import TRAILING_BYTES

from .metrics_kafka import KafkaNamesCollector, Sources, walk_retrying
from .metrics_unlocked import UnlockedCounter, UnlockedHistogram


class RecentObservations:
    """A histogram that also keeps its last observations, time-stamped, for the windowed
    statistics Kafka's names report (coordinator/metrics_kafka.py): `observe` is all the
    callers use. Bounded (`keep` values); the scrape copies the deque in one C call."""

    __slots__ = ("histogram", "recent", "_clock")

    def __init__(self, histogram: Histogram | UnlockedHistogram, keep: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.histogram = histogram
        self.recent: deque[tuple[float, float]] = deque(maxlen=keep)
        self._clock = clock

    def observe(self, value: float) -> None:
        self.histogram.observe(value)
        self.recent.append((self._clock(), value))

    def since(self, start: float) -> list[float]:
        """The values observed at or after `start` (the clock's time)."""
        return [v for t, v in list(self.recent) if t >= start]


# Counted once per group request: without prometheus_client's lock per increment (metrics_unlocked.py).
REQUESTS = UnlockedCounter("kcoord_group_requests_total", "Group API requests served", ["api", "error"])
REQUEST_SECONDS = UnlockedHistogram("kcoord_group_request_seconds", "Group API latency, including the "
                                    "wait for the state-topic write", ["api"],
                                    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5))
# Counted once per state-topic batch, from the event loop's thread: unlocked as well.
WRITE_SECONDS = UnlockedHistogram("kcoord_state_write_seconds", "State-topic batch write latency", [],
                                  buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5))
RECORDS_WRITTEN = UnlockedCounter("kcoord_state_records_written_total", "Records appended to the state topic", [])
SHARD_STATE = Gauge("kcoord_shard_active", "1 when the shard serves, 0 otherwise", ["partition"])
# Kafka's coordinator runtime reports `partition-count{state=...}`; kcoord reports the same
# per state, and the state of each partition, so an alert can name the failed one.
SHARD_STATES = ("loading", "active", "failed", "unloaded", "closed")
SHARD_STATE_BY_PARTITION = Gauge("kcoord_shard_state", "1 for the state each state-topic partition's "
                                 "shard is in, 0 for the others", ["partition", "state"])
PARTITIONS_BY_STATE = Gauge("kcoord_coordinator_partitions", "State-topic partitions (shards) by state "
                            "(Kafka: partition-count{state})", ["state"])
LOAD_FAILURES = Counter("kcoord_shard_load_failures_total", "Shard loads that failed on a record "
                        "(the shard stays failed)", ["partition"])
LOAD_SKIPPED = Counter("kcoord_shard_load_skipped_records_total", "Records skipped at load because "
                       "state.load.skip.corrupt.offsets names them", ["partition"])
# Upstream and state-topic watch (coordinator/gateway/cluster.py, coordinator/service/).
# One counter for every state-topic incident, by kind: the watcher's missing, new_topic_id,
# wrong_partitions, write_failed, recreated, and the service's lost (every shard unloaded)
# and reload (every shard reloaded from the log).
UPSTREAM_UP = Gauge("kcoord_upstream_up", "1 while the upstream cluster answers kcoord's metadata "
                    "requests, 0 while it does not")
UPSTREAM_OUTAGES = Counter("kcoord_upstream_outages_total", "Times the upstream stopped answering "
                           "kcoord's metadata requests")
STATE_TOPIC_PRESENT = Gauge("kcoord_state_topic_present", "1 while the upstream lists the state topic "
                            "with the topic id and partitions kcoord's state was loaded from")
STATE_TOPIC_INCIDENTS = Counter("kcoord_state_topic_incidents_total", "State-topic incidents: missing, "
                                "new_topic_id, wrong_partitions, write_failed, recreated, lost (all "
                                "shards unloaded), reload (all shards reloaded)", ["kind"])

# Kafka's coordinator-runtime and group-coordinator metrics, under kcoord's prefix:
# partition-load-time-avg/max (per load), and the rebalance counts of GroupCoordinatorMetrics
# (consumer-group-rebalance-count, group-completed-rebalance-count): a rebalance is a new group
# epoch for a consumer group, a new generation for a classic one (GroupMetadata with members).
LOAD_SECONDS = RecentObservations(Histogram(
    "kcoord_partition_load_seconds", "Time to load a state-topic partition (Kafka: partition-load-time)",
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300)))
REBALANCES = Counter("kcoord_group_rebalances_total", "Group rebalances by group type: a new group epoch "
                     "(consumer) or generation (classic) (Kafka: consumer-group-rebalance-count, "
                     "group-completed-rebalance-count)", ["type"])
# Kafka: offset-commit-count/-rate, one per offset record written (OffsetCommit and TxnOffsetCommit).
OFFSET_COMMITS = UnlockedCounter("kcoord_offset_commits_total", "Committed offsets written by OffsetCommit and "
                                 "TxnOffsetCommit (Kafka: offset-commit-count)", [])
SHARD_FENCED = Counter("kcoord_shard_fenced_total", "Shards unloaded because another process took them "
                       "(a fencing error on write)")
# Readiness (ops/deploy/probe.py, the Kubernetes readinessProbe): 1 while this process may
# answer. A single process always may; a kcoord cluster member only while its membership
# lease is valid (coordinator/cluster/lease.py): clustered.py gives the gauge a function
# read at scrape time, so nothing is set per heartbeat.
SERVING = Gauge("kcoord_serving", "1 while this process may answer: while its membership lease is valid "
                "(a kcoord cluster member, or a plain serve its membership group admitted); always for an "
                "unwatched plain serve")
SERVING.set(1)
# Kafka's coordinator-runtime event metrics (event-queue-time-ms, event-processing-time-ms),
# sampled: one operation in EVENT_SAMPLE is timed, so the heartbeat path pays a counter
# increment, not two clock reads and a histogram observation (~2 µs) per request.
EVENT_SAMPLE = 16
# Observed by the shards' runtime on the event loop's thread alone: unlocked as well.
EVENT_QUEUE_SECONDS = RecentObservations(UnlockedHistogram(
    "kcoord_event_queue_seconds", "Time an operation waits for its shard before it runs (Kafka: "
    "event-queue-time-ms; one in 16 sampled)", [],
    buckets=(1e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1, 5)))
EVENT_PROCESSING_SECONDS = RecentObservations(UnlockedHistogram(
    "kcoord_event_processing_seconds", "Time an operation runs on its shard, write excluded (Kafka: "
    "event-processing-time-ms; one in 16 sampled)", [],
    buckets=(1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.1)))
# The fenced state log under transactions v1: a shard's next transaction waits
# while the upstream still writes the previous one's markers (CONCURRENT_TRANSACTIONS).
CONCURRENT_TRANSACTIONS_RETRIES = Counter("kcoord_state_concurrent_transactions_total", "State-log transaction "
                                          "requests answered CONCURRENT_TRANSACTIONS and retried")
CONCURRENT_TRANSACTIONS_SECONDS = Counter("kcoord_state_concurrent_transactions_seconds_total", "Time state-log "
                                          "writes spent backing off on CONCURRENT_TRANSACTIONS")
PARTITION_LAST_LOAD_SECONDS = Gauge("kcoord_partition_last_load_seconds", "How long each state-topic partition's "
                                    "last load took", ["partition"])
# A kcoord cluster (coordinator/clustered.py): this instance's view. A single
# process exports them at their defaults (generation -1, no shards moved).
CLUSTER_GENERATION = Gauge("kcoord_cluster_generation", "The membership group generation this instance's "
                           "assignment is from (-1: not in a kcoord cluster)")
CLUSTER_GENERATION.set(-1)
CLUSTER_INSTANCES = Gauge("kcoord_cluster_instances", "kcoord instances in this instance's current assignment")
CLUSTER_SHARDS = Gauge("kcoord_cluster_shards", "State-topic partitions (shards) assigned to this instance")
CLUSTER_SHARD_MOVES = Counter("kcoord_cluster_shard_moves_total", "Shards assigned to (in) or revoked from (out) "
                              "this instance", ["direction"])
for _direction in ("in", "out"):
    CLUSTER_SHARD_MOVES.labels(direction=_direction)
CLUSTER_NODE_ID = Gauge("kcoord_cluster_node_id", "This instance's synthetic coordinator node id (-1: none)")
CLUSTER_NODE_ID.set(-1)
CLUSTER_LEASE_REMAINING = Gauge("kcoord_cluster_lease_remaining_seconds", "Time left on the membership lease; "
                                "at 0 the instance answers nothing (read at scrape time)")
_shard_states: dict[int, str] = {}


def set_shard_state(partition: int, state: str) -> None:
    """Record a shard's transition (a few per shard lifetime: not on the request path)."""
    previous = _shard_states.get(partition)
    if previous == state:
        return
    _shard_states[partition] = state
    label = str(partition)
    if previous is not None:
        PARTITIONS_BY_STATE.labels(state=previous).dec()
        SHARD_STATE_BY_PARTITION.labels(partition=label, state=previous).set(0)
    else:
        for s in SHARD_STATES:
            SHARD_STATE_BY_PARTITION.labels(partition=label, state=s).set(0)
    PARTITIONS_BY_STATE.labels(state=state).inc()
    SHARD_STATE_BY_PARTITION.labels(partition=label, state=state).set(1)
    SHARD_STATE.labels(partition=label).set(1 if state == "active" else 0)


class GroupCollector:
    """Groups and members by type and state, and the streams groups' warm-ups, computed at scrape
    time from the shards."""

    def __init__(self, shards: Callable[[], Iterable], state_of: Callable[[Any], str]) -> None:
        self._shards = shards
        self._state_of = state_of

    def _walk(self) -> tuple[dict[tuple[str, str], int], dict[str, int], Any, int, int]:
        """The groups by (type, state), the members by type, a shard's heartbeat policy, and the
        warm-ups placed and moves held: one walk of every shard's groups."""
        counts: dict[tuple[str, str], int] = {}
        member_counts: dict[str, int] = {}
        policy = None
        warmups = held_moves = 0
        for shard in self._shards():
            policy = shard.heartbeat_policy     # the service gives every shard the process-wide count
            # kcoord's warm-ups, read in this same walk: the warm-up tasks in the streams members'
            # current assignments, and the moves the group's warm-up plan holds back
            # (coordinator/group/streams/warmup.py's `Plan`, soft state the streams contribution
            # keeps on the shard by group id; looked up, never created, as the group layer's
            # soft_of would). Two passes over each streams group's members: a scrape stays linear
            # in the groups and members, and the heartbeat path gains nothing. The dicts are
            # walked as copies (metrics_kafka.walk_retrying says why).
            soft_by_group = getattr(shard, "streams_soft", None) or {}
            for g in list(shard.groups.values()):
                kind = g.group_type
                state = self._state_of(g)
                counts[(kind, state)] = counts.get((kind, state), 0) + 1
                member_counts[kind] = member_counts.get(kind, 0) + len(g.members)
                if kind == "streams":
                    warmups += g.warmup_tasks()
                    soft = soft_by_group.get(g.group_id)
                    plan = None if soft is None else soft.warmups
                    if plan is not None:
                        held_moves += plan.held_moves(g.members)
        return counts, member_counts, policy, warmups, held_moves

    def collect(self):
        groups = GaugeMetricFamily("kcoord_groups", "Groups by type and state", labels=["type", "state"])
        members = GaugeMetricFamily("kcoord_group_members", "Members by group type", labels=["type"])
        counts, member_counts, policy, warmups, held_moves = walk_retrying(self._walk)
        for (kind, state), n in counts.items():
            groups.add_metric([kind, state], n)
        for kind, n in member_counts.items():
            members.add_metric([kind], n)
        yield groups
        yield members
        # Exported at 0 when no group has warm-ups (the switch off, or every plan done), so a
        # dashboard or alert finds the series.
        yield GaugeMetricFamily("kcoord_streams_group_warmup_tasks", "Warm-up tasks in the streams members' "
                                "current assignments (kcoord's warm-up tasks, off by default)",
                                value=warmups)
        yield GaugeMetricFamily("kcoord_streams_group_held_task_moves", "Stateful task moves the streams groups' "
                                "current assignments hold back: the task kept off its new owner (on its holder, "
                                "or a caught-up standby), with or without a warm-up, until the new owner is within "
                                "streams.acceptable.recovery.lag", value=held_moves)
        # The interval KIP-848 members are told now, read here and not observed per heartbeat
        # (the hot path): coordinator/group/modern/consumer/heartbeat_policy.py says why.
        interval = GaugeMetricFamily("kcoord_heartbeat_interval_ms", "Heartbeat interval kcoord hands "
                                     "KIP-848 members now: stable (nothing to reconcile) and pending "
                                     "(reconciliation work)", labels=["kind"])
        for kind, ms in (walk_retrying(policy.handed_out_ms) if policy is not None else {}).items():
            interval.add_metric([kind], ms)
        yield interval
        # Records loaded although bytes followed their key or value struct (Kafka ignores
        # such bytes; kcoord counts them: records/_trailing.py).
        trailing = CounterMetricFamily("kcoord_state_records_trailing_bytes",
                                       "State-topic records loaded despite trailing bytes after their struct")
        trailing.add_metric([], TRAILING_BYTES.records)
        yield trailing


def register_group_collector(shards: Callable[[], Iterable], state_of: Callable[[Any], str]) -> GroupCollector:
    """kcoord's group gauges, and the group coordinator metrics under Kafka's names
    (coordinator/metrics_kafka.py), both read from the shards at scrape time. ``state_of``
    is the group type's state name of a group (the group layer's registry, which this
    module may not import): a streams group computes its state, other types keep it."""
    collector = GroupCollector(shards, state_of)
    REGISTRY.register(collector)
    REGISTRY.register(KafkaNamesCollector(shards, kafka_sources(), state_of))
    return collector


def kafka_sources() -> Sources:
    """This process's series the Kafka-named metrics are computed from."""
    return Sources(shard_states=lambda: dict(_shard_states), rebalances=REBALANCES, loads=LOAD_SECONDS,
                   event_queue=EVENT_QUEUE_SECONDS, event_processing=EVENT_PROCESSING_SECONDS,
                   event_sample=EVENT_SAMPLE, offset_commits=OFFSET_COMMITS)


# --- Gateway: bad input, limits, state-topic protection. Label values come from
# small fixed sets in coordinator/gateway (never from a client).
GATEWAY_FORWARD_DENIED = Counter(
    "kcoord_gateway_forward_denied_total", "Requests the forward gate (coordinator/authz.py) refused "
    "to forward upstream; each closes its connection", ["api"])
GATEWAY_BAD_REQUESTS = Counter(
    "kcoord_gateway_bad_requests_total", "Requests that closed their connection because they do "
    "not parse or are not served (reason: frame, header, body, unknown_api, unsupported_version)",
    ["reason"])
GATEWAY_FORWARDED = Counter("kcoord_gateway_forwarded_requests_total", "Requests forwarded upstream, by API "
                            "and listener", ["api", "listener"])
# to_client counts upstream's answers to the client's own requests as upstream sent them, once
# whole: a held ListOffsets' retries (gateway/list_offsets_hold.py) are kcoord's, not counted.
GATEWAY_FORWARDED_BYTES = Counter("kcoord_gateway_forwarded_bytes_total", "Bytes forwarded, by listener and "
                                  "direction (to_upstream: requests; to_client: upstream's answers)",
                                  ["listener", "direction"])
# In front of Tansu, ListOffsets LATEST partitions corrected to the high watermark
# (gateway/tansu_list_offsets.py): outcome "raised" (the HW was above what Tansu listed),
# "same", or "kept" (the Fetch read failed for the partition: Tansu's offset is answered).
GATEWAY_LATEST_CORRECTIONS = Counter("kcoord_gateway_list_offsets_latest_total", "ListOffsets LATEST partitions "
                                     "answered in front of Tansu, by outcome of the high-watermark read",
                                     ["outcome"])
_forward_children: dict[tuple[int, str], tuple] = {}


def forwarded(api_key: int, listener: str, api: Callable[[int], str]) -> tuple:
    """The (requests, bytes to upstream) children for an API on a listener, cached: the
    forward path bumps them per request."""
    key = (api_key, listener)
    children = _forward_children.get(key)
    if children is None:
        children = _forward_children[key] = (
            GATEWAY_FORWARDED.labels(api=api(api_key), listener=listener),
            GATEWAY_FORWARDED_BYTES.labels(listener=listener, direction="to_upstream"))
    return children


GATEWAY_CONNECTIONS_REJECTED = Counter(
    "kcoord_gateway_connections_rejected_total", "New client connections closed by a limit "
    "(max_connections, max_connections_per_ip, max_connection_creation_rate)", ["reason"])
GATEWAY_CONNECTIONS_CLOSED = Counter(
    "kcoord_gateway_connections_closed_total", "Client connections closed by the gateway for a "
    "limit (idle, buffered_responses)", ["reason"])
GATEWAY_READ_PAUSES = Counter(
    "kcoord_gateway_read_pauses_total", "Times the gateway stopped reading a client (inflight, "
    "queue, write, upstream: its upstream connection opening or not draining)", ["reason"])
GATEWAY_STATE_TOPIC_REQUESTS = Counter(
    "kcoord_gateway_state_topic_requests_total", "Client requests naming the state topic, by API "
    "and outcome (refused, split, allowed)", ["api", "outcome"])
GATEWAY_SAFEGUARD_REFUSALS = Counter(
    "kcoord_gateway_safeguard_refusals_total", "Forwarded requests (or entries of them) answered by a "
    "safeguard instead of the upstream, by API and rule (a fixed set: gateway/admin_limits.py, "
    "gateway/safeguards.py)", ["api", "rule"])
# ListOffsets answers held because a topic this process just created has no log yet on the
# broker (gateway/list_offsets_hold.py): outcome "answered" (every held partition answered
# within the bound), "gave_up" (the bound passed, a retry did not decode or was throttled, or
# the client re-authenticates: the answer as upstream gave it, with what the retries did
# answer), "cancelled" (the client went away).
GATEWAY_LIST_OFFSETS_HELD = Counter("kcoord_gateway_list_offsets_held_total", "ListOffsets answers held and "
                                    "asked again for partitions of a just-created topic, by outcome",
                                    ["outcome"])
