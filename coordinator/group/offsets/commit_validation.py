"""Who may commit offsets to a group (Kafka's `validateOffsetCommit` of each group type): each
type's rule lives in its folder (classic/commit_validation.py, modern/consumer/commit_validation.py)
and its `GroupType` hands it to the shared APIs; offsets/ (OffsetCommit, TxnOffsetCommit)
sits above both folders and gathers them here.
"""
from ..classic.commit_validation import validate_classic_commit
from ..group_types import ACCEPT_ALL, PartitionCheck
from ..modern.consumer.commit_validation import validate_consumer_commit

__all__ = ["ACCEPT_ALL", "PartitionCheck", "validate_classic_commit", "validate_consumer_commit"]
