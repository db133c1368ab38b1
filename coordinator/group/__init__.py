"""The group coordinator core: consumer groups (KIP-848), classic groups, offsets, and the
online migration between the protocols. Sans-IO: no sockets, no clock, no threads.

Rule 1 - time and input come in, data goes out. A handler gets a `ShardView`
(context.py), a `RequestContext`, the request and `now_ms`, and returns a `Result`
(result.py): records to write, a response, timer changes, parked-request completions.
It never sleeps, reads a clock, or does I/O.

Rule 2 - state changes only by replay. `GroupCoordinatorShard.apply(result)` replays a
result's records through `Replayer` (replay.py), the same path a load from the log takes,
so a reload always rebuilds exactly the acknowledged state. Kafka's exceptions, and only
those, are named in context.py: classic-group handlers (`Result.replay=False`), protocol
conversion, and soft state.

Rule 3 - dependencies point down. shard.py dispatches to the handler modules; handlers see
context.py, never shard.py; records/ and the protocol layer sit below; the runtime, the
service and the gateway sit above and are never imported here. import-linter checks all
of it (pyproject.toml [tool.importlinter]).

Rule 4 - one table per vocabulary. Record types -> replay handlers (replay.py), timer
kinds -> timer handlers (timers.py, shard.py), API -> error response (error_responses.py),
group class -> what the shared APIs need of it (group_types.py).

Rule 5 - each rule has one owner. The view is state and configuration; the decisions
handlers share live in the module that owns them (context.py lists them) and take the
view as an argument, so no handler calls back into the shard.

Names are Kafka's (group epoch, assignment epoch, member epoch, target assignment,
`CurrentAssignmentBuilder`, ...); docstrings name the Kafka method a function implements.
"""
