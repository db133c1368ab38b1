"""The consumer group type (KIP-848): model, ConsumerGroupHeartbeat, membership and target
assignment, heartbeat policy, assignment pacing, regex subscriptions, client-side assignor
mode (Kafka: `group/modern/consumer/`).
"""
