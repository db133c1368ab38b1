"""records/kio_fields.py: the fields of a kio class as the bounded walk, the generated records'
reader and the fuzzers compile them (kind, Kafka type, struct class, nullable, tag, default)."""
from __future__ import annotations

from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest, TopicPartitions

from records import streams_records as sr
from records.kio_fields import PRIMITIVE, PRIMITIVE_ARRAY, STRUCT, STRUCT_ARRAY, SchemaField, schema_fields


def _by_name(cls: type) -> dict[str, SchemaField]:
    return {f.name: f for f in schema_fields(cls)}


def test_fields_come_in_wire_order_with_their_kind_and_kafka_type():
    fields = schema_fields(ConsumerGroupHeartbeatRequest)
    assert [f.name for f in fields[:3]] == ["group_id", "member_id", "member_epoch"]
    by_name = _by_name(ConsumerGroupHeartbeatRequest)
    assert (by_name["member_epoch"].kind, by_name["member_epoch"].kafka_type) == (PRIMITIVE, "int32")
    assert (by_name["rebalance_timeout"].kind, by_name["rebalance_timeout"].kafka_type) == (PRIMITIVE, "timedelta_i32")
    assert (by_name["subscribed_topic_names"].kind, by_name["subscribed_topic_names"].kafka_type) == (
        PRIMITIVE_ARRAY, "string")
    partitions = by_name["topic_partitions"]
    assert (partitions.kind, partitions.kafka_type, partitions.struct) == (STRUCT_ARRAY, "", TopicPartitions)


def test_nullable_and_defaults_follow_the_class():
    by_name = _by_name(ConsumerGroupHeartbeatRequest)
    assert not by_name["group_id"].nullable and not by_name["group_id"].has_default
    assert by_name["instance_id"].nullable and by_name["instance_id"].has_default
    assert by_name["topic_partitions"].nullable


def test_a_nullable_struct_and_tagged_fields_carry_their_tag():
    endpoint = _by_name(sr.StreamsGroupMemberMetadataValue)["user_endpoint"]
    assert (endpoint.kind, endpoint.struct, endpoint.nullable, endpoint.tag) == (STRUCT, sr.Endpoint, True, None)
    metadata = _by_name(sr.StreamsGroupMetadataValue)
    assert metadata["epoch"].tag is None
    assert [metadata[n].tag for n in ("validated_topology_epoch", "last_assignment_configs")] == [0, 1]
    assert metadata["last_assignment_configs"].has_default
    epochs = _by_name(sr.CurrentTaskIds)["assignment_epochs"]
    assert (epochs.kind, epochs.kafka_type, epochs.tag) == (PRIMITIVE_ARRAY, "int32", 0)


def test_the_answer_is_computed_once_per_class():
    assert schema_fields(sr.CurrentTaskIds) is schema_fields(sr.CurrentTaskIds)
