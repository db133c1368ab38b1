"""The connect group's wire messages (32703-32706) and records (1000-1004): round trips,
the seed's layout, bounded decoding, and the fuzz target's outcomes (issue 18 task 1)."""
from __future__ import annotations

import datetime
import random

import pytest

from coordinator.protocol import connect_messages as cm
from coordinator.protocol.codec import BodyError, decode_body, encode_body
from fuzz.atheris_connect import decode_one
from records import connect_records as cr
from records._wire import FieldError, TrailingBytes

_Z = datetime.timedelta(0)
CAT = cm.ConnectorsAndTasks(connectors=("A",), tasks=(cm.ConnectorTaskId(connector="A", task=0),
                                                      cm.ConnectorTaskId(connector="B", task=3)))

MESSAGES = [
    cm.ConnectGroupHeartbeatRequest(
        group_id="w", member_id="m", member_epoch=0, instance_id="i", rebalance_timeout=datetime.timedelta(seconds=60),
        client_assignors=(cm.ConnectAssignor(name="sessioned", minimum_version=0, maximum_version=2, version=2,
                                             reason=1, metadata=b"ws"),),
        connectors_and_tasks=cm.ConnectorsAndTasks()),
    cm.ConnectGroupHeartbeatRequest(group_id="w", member_id="m", member_epoch=3),
    cm.heartbeat_response(error_code=32700, member_id="m", member_epoch=3, interval_ms=100,
                          assignment=cm.assignment(error=1, units=CAT, version=2, metadata=b"leader")),
    cm.ConnectPrepareAssignmentRequest(group_id="w", member_id="m", member_epoch=3),
    cm.prepare_response(error_code=0, group_epoch=4, assignor_name="sessioned", members=(
        cm.prepared_member(member_id="m", member_epoch=3, instance_id=None, version=2, reason=0, metadata=b"x",
                           units=CAT),)),
    cm.ConnectInstallAssignmentRequest(group_id="w", member_id="m", member_epoch=3, group_epoch=4, error=0, members=(
        cm.ConnectInstalledMember(member_id="m", connectors_and_tasks=CAT, version=2, metadata=b"a"),)),
    cm.install_response(error_code=32701, error_message="Task B/3 is assigned twice"),
    cm.ConnectGroupDescribeRequest(group_ids=("w", "x")),
    cm.describe_response((cm.described_group(error_code=0, group_id="w", group_state="Stable", group_epoch=4,
                                             assignment_epoch=4, assignor_name="sessioned", members=(
        cm.described_member(member_id="m", instance_id=None, client_id="c", client_host="/h", member_epoch=4,
                            state="STABLE", assignment=CAT, target_assignment=CAT, metadata_version=2,
                            metadata=b"u"),)),)),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_messages_round_trip(message):
    body = encode_body(message)
    assert decode_body(type(message), body, 0) == message
    assert encode_body(decode_body(type(message), body, 0)) == body


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_truncation_is_refused(message):
    body = encode_body(message)
    for cut in range(len(body)):
        with pytest.raises(BodyError):
            decode_body(type(message), body[:cut], 0)


def test_heartbeat_layout_is_the_seeds():
    """001:L242-297 in order: ids, epoch, instance, timeout, server assignor, client
    assignors {name, min, max, reason int8, version int16, metadata}, then owned units."""
    body = encode_body(MESSAGES[0])
    assert body.hex() == (
        "02" "77" "02" "6d" "00000000" "0269" "0000ea60" "00"
        "02" "0a" + b"sessioned".hex() + "0000" "0002" "01" "0002" "03" + b"ws".hex() + "00"
        "01" "01" "01" "00"          # ConnectorsAndTasks present (nullable struct): [] [] no tags
        "00")


def test_a_huge_array_count_is_refused_before_allocation():
    body = encode_body(MESSAGES[7])
    assert body[0] == 3                      # group_ids: 2 entries (compact 3)
    with pytest.raises(BodyError, match="group_ids"):
        decode_body(cm.ConnectGroupDescribeRequest, b"\xff\xff\xff\xff\x0f" + body[1:], 0)


RECORDS = [
    cr.ConnectGroupMetadataValue(7),
    cr.ConnectGroupMemberMetadataValue("i", "c", "/h", 60_000, (cr.ConnectAssignor("sessioned", 0, 2, 1, 2, b"ws"),)),
    cr.ConnectGroupMemberMetadataValue(None, "c", "/h", 60_000, (), ((1000, b"\x01"),)),
    cr.ConnectGroupTargetAssignmentMetadataValue(4, 1, "sessioned", 123),
    cr.ConnectGroupTargetAssignmentMetadataValue(4, 0, None, 0),
    cr.ConnectGroupTargetAssignmentMemberValue((cr.ConnectorUnits("A", (-1, 0, 1)),), 2, b"leader"),
    cr.ConnectGroupCurrentMemberAssignmentValue(4, 3, 1, 0, (cr.ConnectorUnits("A", (-1, 0), (3, 4)),),
                                                (cr.ConnectorUnits("B", (-1,), (3,)),), 2, b"m"),
]


@pytest.mark.parametrize("value", RECORDS, ids=lambda v: type(v).__name__)
def test_record_values_round_trip(value):
    encode = cr.VALUE_ENCODERS[type(value)][0]
    body = encode(value, 0)
    assert body[:2] == b"\x00\x00"
    decoded = cr.VALUE_DECODERS[type(value).record_type][0](body)
    assert decoded == value and encode(decoded, 0) == body


@pytest.mark.parametrize("value", RECORDS, ids=lambda v: type(v).__name__)
def test_record_truncations_name_the_field(value):
    body = cr.VALUE_ENCODERS[type(value)][0](value, 0)
    decoder = cr.VALUE_DECODERS[type(value).record_type][0]
    for cut in range(2, len(body)):
        with pytest.raises(FieldError) as e:
            decoder(body[:cut])
        assert e.value.field and not isinstance(e.value, TrailingBytes)
    with pytest.raises(TrailingBytes):
        decoder(body + b"\x00")


def test_misaligned_epochs_are_refused():
    v = cr.ConnectGroupCurrentMemberAssignmentValue(assigned=(cr.ConnectorUnits("A", (0, 1), (3,)),))
    body = cr.encode_current_assignment(v, 0)
    with pytest.raises(FieldError, match="2 tasks"):
        cr.decode_current_assignment(body)


def test_record_types_are_in_the_private_block():
    assert cr.CONNECT_RECORD_TYPES == frozenset(cr.KEY_LAYOUTS) == frozenset(cr.VALUE_DECODERS)
    assert min(cr.CONNECT_RECORD_TYPES) >= 1000
    assert {cls.record_type for cls in cr.VALUE_ENCODERS} == cr.CONNECT_RECORD_TYPES


def test_codec_registration_when_applied():
    """With the shared patch, codec.py knows the types; without it they are UnknownRecords
    (what Kafka and an older kcoord do, KIP-915)."""
    from records import CoordinatorRecord, UnknownRecord, codec, decode_record
    key = b"\x03\xe8" + b"\x00\x01w"
    value = cr.encode_group_metadata(cr.ConnectGroupMetadataValue(5), 0)
    decoded = decode_record(key, value)
    if 1000 in codec._KEY_LAYOUTS:
        assert isinstance(decoded, CoordinatorRecord) and decoded.value.epoch == 5
        assert codec.encode_record(decoded) == (key, value)
    else:
        assert isinstance(decoded, UnknownRecord) and decoded.record_type == 1000


def test_fuzz_target_outcomes_on_random_and_mutated_inputs():
    rng = random.Random(18)
    from fuzz.atheris_connect import MESSAGES as TARGETS
    seeds = []
    for m in MESSAGES:
        seeds.append(bytes([TARGETS.index(type(m))]) + encode_body(m))
    decoded = 0
    for _ in range(3000):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(0, 4)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            data = bytearray(rng.randbytes(rng.randint(0, 60)))
        if decode_one(bytes(data)) is not None:
            decoded += 1
    assert decoded > 0
