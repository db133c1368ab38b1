"""Streams group records (types 17, 19-23, KIP-1071) in records/: Kafka 4.4's bytes, bounded
decoding, a value that does not parse fails the load (as in Kafka), type 18 stays unknown, and a
load of a log with streams records reaches the streams group through the bulk load."""
from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_records_fuzz import _decodes_or_refuses as decodes_or_refuses
from test_records_fuzz import _mutate

from coordinator.group.bulk_replay import BulkReplay
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.group.streams import records as rh
from coordinator.group.streams.model import MemberState, StreamsGroup, StreamsMember, Subtopology, Tasks, Topology
from fuzz.samples import sample
from records import (
    DECODE_ERRORS,
    CoordinatorRecord,
    RecordDecodeError,
    RecordType,
    UnknownRecord,
    UnknownRecordVersionError,
    decode_record,
    encode_record,
)
from records import streams_records as sr

TOP = Topology.of(1, [Subtopology("0", source_topics=("in",))])
MEMBER = StreamsMember(
    "m1", member_epoch=3, previous_member_epoch=2, state=MemberState.STABLE, client_id="c",
    client_host="/127.0.0.1", rebalance_timeout_ms=30_000, topology_epoch=1, process_id="p1",
    user_endpoint=("h", 9000), assigned=Tasks(frozenset({("0", 0), ("0", 1)}), frozenset(), frozenset()),
    active_epochs={("0", 0): 3, ("0", 1): 2})


def _log() -> list[tuple[bytes, bytes | None]]:
    return [encode_record(r) for r in (
        rh.topology("app", TOP),
        rh.member_metadata("app", MEMBER),
        rh.group_metadata("app", 3, 77, 1),
        rh.target_member("app", "m1", MEMBER.assigned),
        rh.target_metadata("app", 3, 1000),
        rh.current_assignment("app", MEMBER),
    )]


def _load(log) -> GroupCoordinatorShard:
    bulk = BulkReplay(GroupCoordinatorShard(0), topic="__consumer_offsets", partition=0)
    for offset, (key, value) in enumerate(log):
        bulk.add(key, value, offset)
    bulk.flush()
    return bulk.shard


def test_a_load_of_streams_records_has_the_streams_group():
    group = _load(_log()).groups["app"]
    assert isinstance(group, StreamsGroup)
    assert group.topology == TOP
    assert group.members == {"m1": MEMBER}
    assert group.target == {"m1": MEMBER.assigned}
    assert (group.group_epoch, group.metadata_hash, group.target_assignment_epoch) == (3, 77, 3)


def test_a_streams_group_metadata_value_that_does_not_parse_fails_the_load():
    log = _log()
    key = log[2][0]
    assert struct.unpack_from(">h", key)[0] == 17
    log[2] = (key, b"\x00\x00\x00\x00\x00")      # version 0, then 3 bytes of a 12-byte struct
    with pytest.raises(RecordDecodeError, match=r"StreamsGroupMetadataValue.*offset 2"):
        _load(log)
    log[2] = (key, b"\x00\x01" + b"\x00" * 13)   # Kafka 4.4 knows version 0 only
    with pytest.raises(UnknownRecordVersionError, match="STREAMS_GROUP_METADATA"):
        _load(log)


def test_type_18_removed_by_kip_1101_stays_unknown_and_is_skipped():
    assert 18 not in {int(t) for t in RecordType}
    key, value = struct.pack(">h", 18) + b"\x00\x03app", b"\x00\x00garbage"
    assert decode_record(key, value) == UnknownRecord(18, key, value)
    assert "app" in _load([*_log(), (key, value)]).groups


def test_kafka_4_4_bytes_of_a_current_assignment():
    # Kafka's framing (kafka-coordinator.md §2.1): key int16 type, classic strings; value int16
    # version 0, then flexible fields. State 1 is Kafka's streams MemberState.STABLE (a consumer
    # member's STABLE is 0). Active task 0/[0, 1] with its KIP-1251 epochs as tag 0.
    value_struct = sr.StreamsGroupCurrentMemberAssignmentValue(
        member_epoch=3, previous_member_epoch=2, state=1,
        active_tasks=(sr.CurrentTaskIds(subtopology_id="0", partitions=(0, 1), assignment_epochs=(3, 2)),),
        standby_tasks=(), warmup_tasks=(), active_tasks_pending_revocation=(),
        standby_tasks_pending_revocation=(), warmup_tasks_pending_revocation=())
    record = CoordinatorRecord(sr.StreamsGroupCurrentMemberAssignmentKey(group_id="g", member_id="m1"),
                               value_struct, 0)
    key, value = encode_record(record)
    assert key == b"\x00\x16" + b"\x00\x01g" + b"\x00\x02m1"
    assert value == bytes.fromhex(
        "0000" "00000003" "00000002" "01"      # version 0, MemberEpoch, PreviousMemberEpoch, State
        "02" "0230" "03 00000000 00000001"     # ActiveTasks: 1 entry, subtopology "0", partitions
        "01" "00 09 03 00000003 00000002"      # its tags: AssignmentEpochs (tag 0, 9 bytes)
        "01 01 01 01 01"                       # the other five arrays are empty
        "00".replace(" ", ""))                 # the value's own tag section
    assert decode_record(key, value) == record


@pytest.mark.parametrize("rtype", sorted(sr.TYPES))
def test_a_length_bomb_is_refused_before_allocating(rtype):
    key_cls, value_cls = sr.TYPES[rtype]
    rng = random.Random(rtype)
    key, value = encode_record(CoordinatorRecord(key_cls(**vars_of(sample(key_cls, rng))),
                                                 value_cls(**vars_of(sample(value_cls, rng))), 0))
    # A compact count of 2**31 where the first array or string starts.
    for at in range(2, len(value)):
        bombed = value[:at] + b"\xff\xff\xff\xff\x07" + value[at + 1:]
        _decodes_or_refuses(key, bombed)


def vars_of(message) -> dict:
    return {f: getattr(message, f) for f in message.__dataclass_fields__ if not f.startswith("__")}


def _decodes_or_refuses(key: bytes, value: bytes | None) -> None:
    # A streams key is a known type: its value decodes to the record or is refused, never unknown.
    assert not isinstance(decodes_or_refuses(key, value), UnknownRecord)


def _seeds() -> list[tuple[bytes, bytes]]:
    rng = random.Random("streams")
    out = _log()
    for key_cls, value_cls in sr.TYPES.values():
        for _ in range(3):
            out.append(encode_record(CoordinatorRecord(key_cls(**vars_of(sample(key_cls, rng))),
                                                       value_cls(**vars_of(sample(value_cls, rng))), 0)))
    return out


SEEDS = _seeds()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SEEDS), st.data())
def test_mutated_streams_values_decode_or_raise_a_decode_error(seed, data):
    key, value = seed
    _decodes_or_refuses(key, _mutate(data, value))


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SEEDS), st.data())
def test_mutated_streams_keys_decode_or_raise_a_decode_error(seed, data):
    key, value = seed
    try:
        decode_record(_mutate(data, key), value, offset=1)
    except DECODE_ERRORS:
        pass
