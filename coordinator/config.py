"""Coordinator configuration, named and defaulted as Apache Kafka 4.3 names them.

Defaults come from Kafka's `GroupCoordinatorConfig` (docs/design/kafka-facts.md §7). Where kcoord
departs from Kafka on purpose, the field says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class CoordinatorConfig:
    # State topic (Kafka: __consumer_offsets with offsets.topic.num.partitions = 50).
    state_topic: str = "__kcoord_offsets"
    state_topic_partitions: int = 50
    state_topic_replication_factor: int = -1  # -1 = the cluster default
    offsets_commit_timeout_ms: int = 5000  # the write timeout of every coordinator write
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    max_write_batch_bytes: int = 8 * 1024 * 1024

    # Several kcoord processes (`kcoord serve --instance-id`, docs/user/cluster.md).
    # fencing: "epoch" (the default with --instance-id: the shard's transactional id only
    # bumps its producer epoch at a takeover, which a fence write then enforces at the
    # partition; appends are plain idempotent batches: docs/design/fencing.md,
    # "fencing=epoch"), "transactional" (each shard writes through its own transactional id,
    # one transaction per append) or "none" (plain writes: one process only, which refuses to
    # serve once a second process joins its membership group). A rolling upgrade from
    # "transactional" to "epoch" needs no stop; the way back needs the epoch processes stopped.
    fencing: str = ""
    cluster_session_timeout_ms: int = 10_000     # the membership group's session timeout
    cluster_heartbeat_interval_ms: int = 1_000
    cluster_rebalance_timeout_ms: int = 30_000
    cluster_lease_margin_ms: int = 2_000         # the lease ends this long before the session could
    # "auto": static members (KIP-345) unless the upstream is Tansu, which cannot carry them
    # (cluster/membership.py static_membership_works); "true" / "false" force the choice.
    cluster_static_membership: str = "auto"
    # A plain `kcoord serve` (no --instance-id) joins the membership group as an observer and
    # exits with code 4 when another kcoord serves the same state topic (cluster/solo.py).
    cluster_solo_check: bool = True

    # KIP-848 consumer groups.
    consumer_session_timeout_ms: int = 45_000
    consumer_min_session_timeout_ms: int = 45_000
    consumer_max_session_timeout_ms: int = 60_000
    consumer_heartbeat_interval_ms: int = 5_000  # Kafka's fixed interval (policy "fixed")
    # kcoord's heartbeat-interval policy (coordinator/group/modern/consumer/heartbeat_policy.py): "adaptive"
    # steers members with reconciliation work to a short interval; "fixed" is Kafka's.
    consumer_heartbeat_policy: str = "adaptive"
    consumer_heartbeat_pending_interval_ms: int = 100
    consumer_heartbeat_stable_interval_ms: int = 500
    consumer_heartbeat_budget_per_second: int = 10_000
    consumer_min_heartbeat_interval_ms: int = 5_000
    consumer_max_heartbeat_interval_ms: int = 15_000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_migration_policy: str = "bidirectional"
    # KIP-1263 (4.3): target assignments are computed at most once per interval. The first
    # change after a quiet interval computes at once; a burst (a join storm) is coalesced.
    # Kafka's default is 1000 and it waits for the next heartbeat after the interval; kcoord
    # uses 100 and arms a timer, so a storm settles in about two heartbeat rounds.
    consumer_assignment_interval_ms: int = 100
    consumer_regex_refresh_interval_ms: int = 600_000
    consumer_regex_batch_refresh_min_interval_ms: int = 10_000

    # Streams groups (KIP-1071), under Kafka 4.4's `group.streams.*` broker settings: the
    # defaults a group gets and the bounds its `streams.*` group configs must lie within
    # (coordinator/group/configs/keys.py; docs/user/streams-groups.md).
    streams_session_timeout_ms: int = 45_000
    streams_min_session_timeout_ms: int = 45_000
    streams_max_session_timeout_ms: int = 60_000
    streams_heartbeat_interval_ms: int = 5_000
    streams_min_heartbeat_interval_ms: int = 5_000
    streams_max_heartbeat_interval_ms: int = 15_000
    streams_initial_rebalance_delay_ms: int = 3_000
    # Kafka's default is 1000 (KIP-1263); kcoord paces as it does consumer groups: 100, with
    # a timer, so a burst of joins settles in about two heartbeat rounds.
    streams_assignment_interval_ms: int = 100
    streams_max_size: int = 2**31 - 1            # `group.streams.max.size`: GROUP_MAX_SIZE_REACHED beyond
    # kcoord's extension, off (0) by default, serve-wide only: a new group's first target with
    # tasks waits until no member has joined for this long, and never longer than
    # max(initial rebalance delay, streams_initial_rebalance_quiet_max_ms) after the first join
    # (membership.py; docs/user/streams-groups.md). Instances started together join over
    # seconds; a target computed after the first join hands it every task, and each later
    # join takes tasks back from a member still opening them.
    streams_initial_rebalance_quiet_ms: int = 0
    streams_initial_rebalance_quiet_max_ms: int = 10_000
    # kcoord's extension, off (0) by default: with the quiet hold on, the target is computed
    # at every join during the hold, and each member is handed at most this many active tasks
    # of it until the hold ends (the first ones in task order, which the sticky assignor keeps
    # while every member's share is at least this many), so instances start work while others
    # still join and nothing they were handed has to move (membership.py).
    streams_initial_rebalance_quiet_tasks: int = 0
    # kcoord's extension, off by default: warm-up tasks. A stateful task moving to another
    # instance stays active on its holder while the new owner restores it as a warm-up, and
    # moves once that owner reports it within the group's `streams.acceptable.recovery.lag`;
    # the group's `streams.num.warmup.replicas` (Kafka's default 2) bounds the warm-ups in
    # flight. Kafka 4.4 assigns none (coordinator/group/streams/warmup.py).
    streams_warmups_enabled: bool = False
    # Kafka 4.4's `group.streams.rack.aware.assignment.tags`, the default of every group's
    # `streams.rack.aware.assignment.tags` (empty): client-tag keys (each instance sets
    # `client.tag.<key>`, which Kafka Streams 4.4 sends in its StreamsGroupHeartbeat's
    # ClientTags) a member must send, else MISSING_CLIENT_TAGS, as Kafka 4.4. And kcoord's
    # extension, off while empty: zone-aware standby placement over these keys, KIP-708's
    # filter; Kafka 4.4's streams `sticky` assignor ignores them
    # (coordinator/group/streams/client_tags.py; docs/user/streams-groups.md).
    streams_rack_aware_assignment_tags: tuple[str, ...] = ()

    # Classic groups.
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    classic_new_member_join_timeout_ms: int = 300_000

    # How often the upstream metadata image is refreshed (Kafka pushes it from
    # the controller; a gateway has to poll).
    metadata_refresh_interval_ms: int = 1_000

    # --- Gateway limits, under Kafka's broker names; `--config NAME=VALUE`
    # takes the dotted names (socket.request.max.bytes=...). Kafka's defaults, except where
    # a comment says why kcoord bounds what Kafka leaves unbounded.
    socket_request_max_bytes: int = 104_857_600       # largest request frame (Kafka's default)
    max_connections: int = 2**31 - 1                  # client connections, all listeners
    max_connections_per_ip: int = 2**31 - 1
    connections_max_idle_ms: int = 600_000            # also ends a half-sent frame then silence
    max_connection_creation_rate: int = 2**31 - 1     # new connections per second (KIP-612)
    # Requests read but not yet answered, per connection. Kafka reads one request per
    # connection at a time (the channel is muted until the response is sent); kcoord
    # pipelines, so it bounds the pipeline instead and stops reading the client past it.
    max_inflight_requests_per_connection: int = 1000
    # Process-wide bounds on requests read and not yet answered (Kafka: queued.max.requests
    # counts its request queue, 500; queued.max.request.bytes -1 = unbounded). kcoord bounds
    # the bytes by default: a client that never reads its answers must not grow memory.
    queued_max_requests: int = 50_000
    queued_max_request_bytes: int = 256 * 1024 * 1024
    # Bytes of answers buffered for one client that does not read them before kcoord stops
    # reading its requests and its upstream answers (backpressure); past the hard limit,
    # or after connections_max_idle_ms of no progress, the connection is closed.
    max_buffered_response_bytes_per_connection: int = 64 * 1024 * 1024
    # Bad-frame log lines per second (each bad frame is still counted in a metric).
    bad_request_log_rate_per_second: int = 10
    # kcoord's own bound (no Kafka name) on a request kcoord decodes or walks, i.e. every
    # request but Produce: its bounded walk and kio's decoding run on the one event loop,
    # linear in element count, so one socket.request.max.bytes frame of tiny elements
    # would stall every client for seconds (Kafka parses on its handler threads). A larger
    # frame closes the connection like any bad frame (reason "frame"). A Produce above it
    # is forwarded without its body walked (records dominate; see docs/user/reliability.md).
    max_decoded_request_bytes: int = 4 * 1024 * 1024
    # How long a client's upstream connection may take to open before the client's
    # connection is closed (as Kafka clients' socket.connection.setup.timeout.ms, 10 s).
    upstream_connect_timeout_ms: int = 10_000
    # The upstream's num.partitions: how many partitions kcoord counts for a CreateTopics topic
    # with num_partitions=-1 against Kafka's 10,000-per-request limits (gateway/admin_limits.py).
    # 0 = auto: 3 in front of Tansu (what Tansu 0.6 creates, measured), 1 in front of Kafka
    # (its default; a Kafka broker enforces its own limits anyway). Set it to the broker's
    # value when that is larger.
    num_partitions: int = 0
    # Each partition's record batch of a forwarded Produce is checked in Kafka's order
    # (gateway/produce_check.py). produce.verify.crc: "auto" checks the CRC-32C in front of an
    # upstream that does not check it itself (Tansu), not in front of Kafka; "true"/"false"
    # force it. message.max.bytes: Kafka's broker default of a topic's max.message.bytes;
    # unset (2**31-1) kcoord does not enforce it, as it does not know each topic's own value.
    # produce.record.checks=false forwards batches unchecked (for measurement, or an upstream
    # that checks every batch itself); the state-topic rule still applies.
    produce_record_checks: bool = True
    produce_verify_crc: str = "auto"
    message_max_bytes: int = 2**31 - 1
    # Safeguards on forwarded admin requests (gateway/safeguards.py, docs/user/reliability.md
    # "Safeguards"), process-wide; per listener `listener.name.<l>.safeguard.X`, per principal
    # `principal.<User:n>.safeguard.X`. Defaults are Kafka's own limits.
    safeguard_topic_max_partitions: int = 2**31 - 1
    safeguard_request_max_partitions: int = 10_000
    safeguard_topic_max_replication_factor: int = 32767
    safeguard_topic_name_pattern: str = ""
    safeguard_topic_config_bounds: tuple[str, ...] = ()     # NAME=MIN:MAX items
    safeguard_delete_topics_deny_pattern: str = ""
    safeguard_controller_mutation_rate: float = 0.0         # partitions/s per principal; 0: unlimited

    # --- Loading: "P:O" entries naming state-topic records the operator has
    # chosen to skip (state.load.skip.corrupt.offsets=3:1200,7:55). Nothing else is skipped.
    state_load_skip_corrupt_offsets: tuple[str, ...] = ()

    extra: dict[str, str] = field(default_factory=dict)

    # --- Client-side assignors (docs/design/client-assignors-spec.md): serve the private APIs 32700-32702
    # (coordinator/protocol/private_apis.py). Off: neither advertised nor routed.
    # --config group.consumer.client.assignors.enabled=false
    consumer_client_assignors_enabled: bool = True

    # --- The connect group type (docs/design/connect-groups-spec.md): serve the private APIs 32703-32706
    # (coordinator/connect_apis.py). Off: neither advertised nor routed. Workers' sessions and
    # heartbeat intervals are the consumer groups' (consumer_session_timeout_ms, ...).
    # --config group.connect.groups.enabled=false
    connect_groups_enabled: bool = True

    # --- Transactional offset commits (docs/design/transactions.md "Bounds on pending
    # state"): kcoord's caps on pending transactional offsets (Kafka caps none; its
    # transaction timeout ends them). Over a cap TxnOffsetCommit answers TRANSACTION_ABORTABLE
    # (INVALID_TXN_STATE below v4) and writes nothing. Read by txn_offset_commit.limits_of.
    txn_max_pending_per_producer: int = 50_000
    txn_max_open_producers_per_group: int = 10_000
    txn_max_pending_per_shard: int = 1_000_000
    # Serve TxnOffsetCommit/AddOffsetsToTxn in a single process: its loads read the state
    # log raw with the marker-aware reader. `--config txn_offsets=false` falls back to the
    # plain reader (committed transactions replayed at their marker, no client producer ids),
    # TxnOffsetCommit unadvertised and AddOffsetsToTxn forwarded (as before exactly-once
    # offsets). Several processes (--instance-id) always serve them.
    # docs/design/transactions.md.
    txn_offsets: bool = True

    @property
    def default_assignor(self) -> str:
        return self.consumer_assignors[0]
