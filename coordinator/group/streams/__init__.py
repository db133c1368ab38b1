"""Streams groups (KIP-1071), Kafka 4.4's `group/streams` package: a group type that implements
the group interface directly (tasks, process ids, a topology), not `ModernGroup`.

The map: model.py (the group, its members, tasks, settings), record_types.py and records.py
(records 17 and 19-23 in Kafka's format), replay.py, topology.py (the topology configured
against the metadata image: statuses), assignor.py (the built-in sticky assignor),
reconciliation.py (revoke before assign), heartbeat.py and responses.py (StreamsGroupHeartbeat),
membership.py and timers.py (removal, target, pacing, timers), warmup.py (kcoord's warm-up
tasks, off by default), group_type.py (what the shared
APIs ask), contribution.py (what the core is handed). What Kafka 4.4 does that is not built
yet: docs/design/streams-groups.md.

Rules: the same as the core's (coordinator/group/__init__.py): handlers are pure and return a
`Result`; only replay changes a group; soft state lives on the shard (model.Soft).
"""
