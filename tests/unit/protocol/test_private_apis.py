"""The private API block (issue 17, seed-drafts.md §0, X1): clear of every Kafka number,
and the private messages round-trip and are bounds-checked like Kafka's.

The Kafka numbers are read from the jars Maven Central serves (scripts/fetch_java_jars.py,
through tests/support/java.py): `common/message/*.json` for API keys and record types,
and the `Errors` class for error codes.
"""
from __future__ import annotations

import datetime
import json
import re
import uuid
import zipfile
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from coordinator.protocol import apis
from coordinator.protocol import private_apis as pa
from coordinator.protocol import private_messages as pm
from coordinator.protocol.codec import BodyError, decode_body, encode_body
from support.java import ensure_java_jars

FOO = uuid.uuid5(uuid.NAMESPACE_DNS, "foo")


def _jars(pattern: str, dirs: tuple[str, ...] = ("libs",)) -> list[Path]:
    cache = ensure_java_jars()
    found = sorted(jar for d in dirs for jar in (cache / d).glob(pattern))
    assert found, f"no {pattern} in {[str(cache / d) for d in dirs]}"
    return found


def _message_jsons(jar: Path) -> list[dict]:
    out = []
    with zipfile.ZipFile(jar) as z:
        for name in z.namelist():
            if name.startswith("common/message/") and name.endswith(".json"):
                text = z.read(name).decode()
                # Kafka's message JSON has // comments
                out.append(json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M)))
    return out


def _kafka_jars() -> list[Path]:
    """kafka-clients 4.4 (libs/) and 4.3 (jars-4.3/, the client of the driver baselines on Tansu)."""
    jars = _jars("kafka-clients-4.[34]*.jar", ("libs", "jars-4.3"))
    assert {j.name[:len("kafka-clients-4.3")] for j in jars} == {"kafka-clients-4.3", "kafka-clients-4.4"}
    return jars


def test_api_keys_are_clear_of_kafka():
    kafka_keys: set[int] = set()
    for jar in _kafka_jars():
        for m in _message_jsons(jar):
            if m.get("type") in ("request", "response"):
                kafka_keys.add(int(m["apiKey"]))
    assert {0, 18, 68, 69, 92} <= kafka_keys, "the jar's message definitions were not read"
    assert max(kafka_keys) < min(pa.PRIVATE_KEY_BLOCK)
    assert not (kafka_keys & set(pa.PRIVATE_KEY_BLOCK))
    assert pa.ALL_PRIVATE_KEYS <= set(pa.PRIVATE_KEY_BLOCK)
    assert set(pm.REQUESTS) == set(pa.CLIENT_ASSIGNOR_APIS)


def test_record_types_and_tags_are_clear_of_kafka():
    record_types: set[int] = set()
    tags: set[int] = set()
    for jar in _jars("kafka-group-coordinator-4.[34]*.jar"):
        for m in _message_jsons(jar):
            if m.get("type") in ("coordinator-key", "coordinator-value", "data"):
                if m.get("type") == "coordinator-key":
                    record_types.add(int(m["apiKey"]))
                stack = list(m.get("fields", ()))
                while stack:
                    f = stack.pop()
                    if "tag" in f:
                        tags.add(int(f["tag"]))
                    stack.extend(f.get("fields", ()))
    assert {0, 1, 2, 3, 8, 23} <= record_types, "the group coordinator's records were not read"
    assert max(record_types) < 1000
    assert max(tags, default=-1) < pa.PRIVATE_TAG_BASE


def _sipush(value: int) -> bytes:
    return bytes([0x11]) + value.to_bytes(2, "big", signed=True)


def test_error_codes_are_clear_of_kafka():
    # kio's ErrorCode mirrors Kafka's Errors (-1..133 in 4.3).
    assert max(e.value for e in ErrorCode) < min(pa.PRIVATE_ERROR_BLOCK)
    for jar in _kafka_jars():
        with zipfile.ZipFile(jar) as z:
            errors = z.read("org/apache/kafka/common/protocol/Errors.class")
        # Every Errors constant is built with its code as a constant operand: codes above
        # 127 are pushed with `sipush`. None of ours may appear.
        assert _sipush(133) in errors, "Errors.class does not look like Kafka 4.3's"
        for code in pa.PRIVATE_ERRORS:
            assert _sipush(code) not in errors, f"{jar.name} pushes {code}"


def test_private_schemas_are_v0_flexible():
    for key in {**pa.CLIENT_ASSIGNOR_APIS, **pa.CONNECT_APIS}:
        s = apis.api_schemas(key)
        assert s is not None and (s.min_version, s.max_version) == (0, 0) and s.flexible(0)
        assert s.requests[0].__api_key__ == key and s.responses[0].__api_key__ == key
        assert apis.api_name(key) == pa.private_name(key)
    assert pa.private_classes(68) is None and pa.private_classes(32707) is None
    assert apis.api_schemas(32707) is None and apis.api_name(32707) == "api_key_32707"
    assert set(pa.CONNECT_APIS) == {pa.CONNECT_GROUP_HEARTBEAT, pa.CONNECT_GROUP_PREPARE_ASSIGNMENT,
                                    pa.CONNECT_GROUP_INSTALL_ASSIGNMENT, pa.CONNECT_GROUP_DESCRIBE}


def _heartbeat() -> pm.CsaHeartbeatRequest:
    return pm.CsaHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, rebalance_timeout=datetime.timedelta(seconds=3),
        subscribed_topic_names=("foo",), topic_partitions=(),
        client_assignors=(pm.ClientAssignor(name="s", minimum_version=0, maximum_version=1, version=1,
                                            reason=1, metadata=b"meta"),))


SAMPLES = [
    _heartbeat(),
    pm.CsaHeartbeatResponse(throttle_time=datetime.timedelta(0), error_code=pa.COMPUTE_ASSIGNMENT, member_id="m",
                            member_epoch=1, heartbeat_interval=datetime.timedelta(milliseconds=100),
                            assignment=pm.CsaAssignment(
                                topic_partitions=(pm.TopicPartitions(topic_id=FOO, partitions=(0, 5)),),
                                error=7, metadata_version=1, metadata_bytes=b"x")),
    pm.PrepareAssignmentRequest(group_id="g", member_id="m", member_epoch=1),
    pm.PrepareAssignmentResponse(
        throttle_time=datetime.timedelta(0), error_code=0, group_epoch=2, client_assignor_name="s",
        members=(pm.PreparedMember(member_id="a", member_epoch=1, instance_id=None, rack_id="r1",
                                   subscriptions=(FOO,), assignor_version=1, assignor_metadata=b"m",
                                   topic_partitions=(pm.TopicPartitions(topic_id=FOO, partitions=(1,)),)),),
        partition_metadata=(pm.PartitionMetadata(topic_id=FOO, topic_name="foo", num_partitions=6),)),
    pm.InstallAssignmentRequest(
        group_id="g", member_id="a", member_epoch=1, group_epoch=2, error=0,
        members=(pm.InstalledMember(member_id="a", partitions=(pm.TopicPartitions(topic_id=FOO, partitions=(0, 1)),),
                                    metadata_version=1, metadata_bytes=b"x"),)),
    pm.InstallAssignmentResponse(throttle_time=datetime.timedelta(0), error_code=pa.INVALID_ASSIGNMENT,
                                 error_message="foo-0 is assigned twice"),
]


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip(message):
    body = encode_body(message)
    assert decode_body(type(message), body, 0) == message
    assert encode_body(decode_body(type(message), body, 0)) == body


def test_heartbeat_bytes_are_the_seed_layout():
    """The layout pinned byte by byte: key 68 v1's fields, then ClientAssignors before
    TopicPartitions, int16 versions and an int8 reason (seed-drafts.md §1.2, §1.7 #2)."""
    body = encode_body(_heartbeat())
    assert body.hex() == (
        "02" "67" "02" "6d" "00000000" "00" "00" "00000bb8" "02" "04666f6f" "00" "00"
        "02" "0273" "0000" "0001" "01" "0001" "056d657461" "00"   # ClientAssignors [s 0..1 r1 v1 "meta"]
        "01" "00")                                               # TopicPartitions [], no tags


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_every_truncation_is_refused_with_a_field_path(message):
    body = encode_body(message)
    for cut in range(len(body)):
        with pytest.raises(BodyError) as e:
            decode_body(type(message), body[:cut], 0)
        assert type(message).__name__ in str(e.value)


def test_hostile_lengths_are_refused_before_allocation():
    body = encode_body(SAMPLES[4])
    # the tail is metadata_bytes ("x": 02 78), then two empty tag sections: claim 2**31 bytes
    assert body[-4:] == b"\x02x\x00\x00"
    body = body[:-4] + b"\xff\xff\xff\xff\x07" + b"\x00\x00"
    with pytest.raises(BodyError, match=r"metadata_bytes: length .* but only .* remain"):
        decode_body(pm.InstallAssignmentRequest, bytes(body), 0)
    # ClientAssignors' count sits at byte 21 (after the fields key 68 v1 has): claim 2**32
    with pytest.raises(BodyError, match=r"field client_assignors: .*remain"):
        decode_body(pm.CsaHeartbeatRequest, encode_body(_heartbeat())[:21] + b"\xff\xff\xff\xff\x0f", 0)
