"""Classic groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup): the model, the join, the
rebalance machinery and the other classic APIs (Kafka: `group/classic/`).

Rule: nothing here imports the modern group types or migration/; a classic member inside a
consumer group is migration's business (group/migration/), which sits above both.
"""
