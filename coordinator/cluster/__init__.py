"""A kcoord cluster: several processes sharing one state topic.

The processes form a group on the upstream (protocol type `kcoord`, Kafka's classic group
protocol, as Connect workers and Schema Registry do), and its leader hands the state-topic
partitions (shards) out. Writes are made exclusive by per-shard transactional producers
(fencing), not by this membership: membership decides who *should* serve a shard; the
producer epoch decides who *can* write to it.

Sans-IO parts (this package; no sockets, no clock, no asyncio):
    protocol   the member metadata and the assignment kcoord members exchange through
               JoinGroup/SyncGroup, and their checked decoding (the bytes come from the
               upstream group, written by other processes: decoded defensively)
    balancer   the leader's sticky, cooperative assignment of shards to instances, with
               the full shard -> instance map every member receives
    lease      the monotonic-clock lease that stops a paused process from answering
"""
