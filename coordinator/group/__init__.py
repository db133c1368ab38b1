"""The group coordinator core: consumer groups (KIP-848), classic groups, connect groups, offsets,
and the online migration between the protocols. Sans-IO: no sockets, no clock, no threads.

Rule 1 - time and input come in, data goes out. A handler gets its folder's view of the
shard (context.py: `ClassicView`, `ConnectView`, `OffsetsView`; modern/consumer/view.py:
`ConsumerView`; the kernel and migration/ see `ShardView`), a `RequestContext`, the request
in its one shape (the folder's requests.py, or admin_requests.py for the APIs every type
answers, built at the shard's door: the handlers read fields, never the wire version) and
`now_ms`, and returns a `Result` (result.py): records to write, a response, timer changes,
parked-request completions. It never sleeps, reads a clock, or does I/O.

Rule 2 - state changes only by replay. `GroupCoordinatorShard.apply(result)` replays a
result's records through `Replayer` (replay.py), the same path a load from the log takes,
so a reload always rebuilds exactly the acknowledged state. Kafka's exceptions, and only
those, are named in context.py: classic-group handlers (`Result.replay=False`), protocol
conversion, and soft state.

Rule 3 - dependencies point down. The kernel names no folder: the folders import it and
declare what they add (their `Contribution`); builtin.py, the one module that names them
all, builds the shard's registry from them, and shard.py dispatches through that registry.
Handlers see context.py, never shard.py; records/ and the protocol layer sit below; the
runtime, the service and the gateway sit above and are never imported here. import-linter
checks all of it, the absence of cycles between the kernel and the folders included
(pyproject.toml [tool.importlinter]).

Rule 4 - one table per vocabulary, each built once from the contributions
(group_types.build_registry), never changed at import. Record types -> replay rules
(replay.py and each folder's replay.py), timer kinds -> timer handlers (timers.py names the
kinds), (API, group class) -> handler (operations.py), API -> its row and error response
(protocol/api_table.py), group class -> what the shared APIs need of it (group_types.py).

The map: one folder per group type, as Kafka's group-coordinator module files them.
- the kernel, here: shard.py (the door: dispatch, replay, timers, lifecycle), operations.py,
  replay.py, bulk_replay.py, context.py, result.py, timers.py, group_types.py (the registry
  and `Contribution`), offset_store.py, errors.py, image.py, hashing.py, record_helpers.py,
  kio_util.py, timeutil.py; above them group_admin.py (the APIs every type answers:
  ListGroups, DescribeGroups, DeleteGroups, ConsumerGroupDescribe), their request shapes in
  admin_requests.py, and builtin.py (the built-in contributions, assembled);
- classic/: classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup);
- modern/: what the epoch-based types share (group.py: Kafka's `ModernGroup`; the
  reconciliation builder; the client-side assignment engine), with modern/consumer/ (KIP-848)
  and modern/connect/ below it; streams groups will not fit modern/ (modern/group.py says why);
- offsets/: committed offsets, OffsetCommit/Fetch/Delete, TxnOffsetCommit, retention;
- migration/: the online conversion between classic and consumer groups. It sits above
  classic/ and modern/consumer/ and imports both; neither imports it: it contributes the
  rows of the classic APIs on a consumer group and of the consumer heartbeat
  (migration/rows.py), and the timers that may fence a member;
- assignors/: the server-side assignors.
classic/ and modern/ never import each other, nor do consumer/ and connect/. A new group type
is a folder plus its contribution.py: its model and `GroupType`, its records' replay rules,
its operations rows (each becomes `shard.<operation>`), its timer kinds and load hooks,
added to builtin.CONTRIBUTIONS; nothing in the other folders or the kernel changes
(tests/unit/group/toy/ does it, with builtin.registry_with).

Rule 5 - each rule has one owner. The view is state and configuration; the decisions
handlers share live in the module that owns them (context.py lists them) and take the
view as an argument, so no handler calls back into the shard.

Names are Kafka's (group epoch, assignment epoch, member epoch, target assignment,
`CurrentAssignmentBuilder`, ...); docstrings name the Kafka method a function implements.
"""
