"""`__consumer_offsets` record classes generated from Kafka 4.4.0's
kafka-group-coordinator jar by coordinator.protocol.messagegen (docs/design/messages.md).
"""
