"""The consumer-protocol scenarios run next to every upstream (support.upstreams): Tansu and
Kafka 4.3 one node, and, as the whole directory is in the ``kafka_subset`` (SUBSET_DIRS), Kafka
4.3 on three nodes, Kafka 3.9 (no KIP-848 of its own: kcoord's reason to exist) and, where
Docker exists, the testcontainers Kafka (the ``kafka_docker`` fixture)."""
