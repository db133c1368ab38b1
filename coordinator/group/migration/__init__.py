"""Online migration between the classic and the consumer (KIP-848) protocols, as Kafka 4.3
does it inside its group coordinator (`convertToConsumerGroup`, `convertToClassicGroup`,
`classicGroupJoinToConsumerGroup`, ...): part of the core, not a layer on top of it.

- `policy.py`: `group.consumer.migration.policy` (disabled, upgrade, downgrade, bidirectional);
- `conversion.py`: a whole group converted (classic -> consumer on the first consumer-protocol
  heartbeat; consumer -> classic when its last consumer-protocol member leaves);
- `mixed.py`: classic members (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) inside a consumer group;
- `rows.py`: the shard's rows (coordinator/group/operations.py) that bring the requests here: the
  classic APIs on a consumer group, and the consumer group heartbeat with migration's upgrade and
  fence. Migration imports classic/ and modern/consumer/; neither imports it.

The rehearsal tool (real clients walking a group through an upgrade and back) stays in the
top-level `migration/` package, which builds on this one and is never imported by it.
"""
