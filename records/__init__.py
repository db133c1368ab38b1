"""Apache Kafka's `__consumer_offsets` records, byte for byte.

Keys/values of record types 0-8 and 16 as Kafka 4.3 writes and reads them, the streams
group types 17 and 19-23 as Kafka 4.4 writes them (records/streams_records.py, KIP-1071), and
kcoord's private connect-group types 1000-1004 (records/connect_records.py, docs/design/connect-groups-spec.md)
(kafka-coordinator.md §2); other types decode to `UnknownRecord` (KIP-915).
Record batches: see `records.batch` (thin helpers over aiokafka.record).

Decoding is bounded (every length is checked against the bytes left before
anything is allocated) and raises only `DECODE_ERRORS`. Bytes after a key or
value struct are ignored as Kafka ignores them; such records are counted in
`TRAILING_BYTES` and logged (rate-limited).
"""

from records._trailing import TRAILING_BYTES
from records.codec import (
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_records,
    encode_value,
    latest_value_version,
)
from records.schemas import (
    ZERO_UUID,
    ClassicMemberMetadata,
    ClassicProtocol,
    ClientAssignor,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    LegacyOffsetCommitKey,
    LegacyOffsetCommitValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionMetadata,
    TopicMetadata,
    TopicPartitions,
)
from records.types import (
    CoordinatorRecord,
    RecordDecodeError,
    RecordEncodeError,
    RecordType,
    UnknownRecord,
    UnknownRecordTypeError,
    UnknownRecordVersionError,
)

# What `decode_record` may raise on bad bytes: anything else is a bug in the codec.
DECODE_ERRORS = (RecordDecodeError, UnknownRecordVersionError)

__all__ = [
    "RecordType", "CoordinatorRecord", "UnknownRecord",
    "encode_key", "encode_value", "encode_record", "encode_records", "decode_record", "decode_key", "decode_value",
    "latest_value_version",
    "UnknownRecordVersionError", "UnknownRecordTypeError", "RecordDecodeError",
    "RecordEncodeError", "ZERO_UUID", "DECODE_ERRORS", "TRAILING_BYTES",
    "LegacyOffsetCommitKey", "LegacyOffsetCommitValue", "OffsetCommitKey", "OffsetCommitValue",
    "GroupMetadataKey", "GroupMetadataValue", "MemberMetadata",
    "ConsumerGroupMetadataKey", "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey", "ConsumerGroupPartitionMetadataValue", "TopicMetadata",
    "PartitionMetadata",
    "ConsumerGroupMemberMetadataKey", "ConsumerGroupMemberMetadataValue", "ClassicMemberMetadata",
    "ClassicProtocol", "ClientAssignor",
    "ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupCurrentMemberAssignmentKey", "ConsumerGroupCurrentMemberAssignmentValue",
    "TopicPartitions",
    "ConsumerGroupRegularExpressionKey", "ConsumerGroupRegularExpressionValue",
]
