"""Apache Kafka's `__consumer_offsets` records, byte for byte.

Keys/values of record types 0-8 and 16 as Kafka 4.3 writes and reads them
(kafka-coordinator.md §2); other types decode to `UnknownRecord` (KIP-915).
Record batches: see `records.batch` (thin helpers over aiokafka.record).
"""

from records.codec import (
    decode_key, decode_record, decode_value, encode_key, encode_record, encode_value,
    latest_value_version,
)
from records.schemas import (
    ZERO_UUID, ClassicMemberMetadata, ClassicProtocol, ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue, ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue, ConsumerGroupMetadataKey, ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey, GroupMetadataValue, LegacyOffsetCommitKey, LegacyOffsetCommitValue,
    MemberMetadata, OffsetCommitKey, OffsetCommitValue, PartitionMetadata, TopicMetadata,
    TopicPartitions,
)
from records.types import (
    CoordinatorRecord, RecordDecodeError, RecordEncodeError, RecordType, UnknownRecord,
    UnknownRecordTypeError, UnknownRecordVersionError,
)

__all__ = [
    "RecordType", "CoordinatorRecord", "UnknownRecord",
    "encode_key", "encode_value", "encode_record", "decode_record", "decode_key", "decode_value",
    "latest_value_version",
    "UnknownRecordVersionError", "UnknownRecordTypeError", "RecordDecodeError",
    "RecordEncodeError", "ZERO_UUID",
    "LegacyOffsetCommitKey", "LegacyOffsetCommitValue", "OffsetCommitKey", "OffsetCommitValue",
    "GroupMetadataKey", "GroupMetadataValue", "MemberMetadata",
    "ConsumerGroupMetadataKey", "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey", "ConsumerGroupPartitionMetadataValue", "TopicMetadata",
    "PartitionMetadata",
    "ConsumerGroupMemberMetadataKey", "ConsumerGroupMemberMetadataValue", "ClassicMemberMetadata",
    "ClassicProtocol",
    "ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupCurrentMemberAssignmentKey", "ConsumerGroupCurrentMemberAssignmentValue",
    "TopicPartitions",
    "ConsumerGroupRegularExpressionKey", "ConsumerGroupRegularExpressionValue",
]
