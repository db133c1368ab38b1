"""Committed offsets (Kafka: `OffsetMetadataManager`): the store replay builds, OffsetCommit/
OffsetFetch/OffsetDelete, TxnOffsetCommit, who may commit (each group type's rule), retention
and expiry, and the transaction.version kcoord may advertise.
"""
