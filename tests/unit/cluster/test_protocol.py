"""kcoord's membership bytes (coordinator/cluster/protocol.py): round trips, and hostile
input refused with an error naming the field."""
from __future__ import annotations

import random
import struct

import orjson
import pytest

from coordinator.cluster.protocol import (
    Assignment,
    Endpoint,
    ListenerPorts,
    MalformedMembershipData,
    MemberMetadata,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)


def test_round_trips():
    m = MemberMetadata("kcoord-0", Endpoint("kc-0.kc", 9092), "eu-1a", frozenset({3, 1}), 1 << 30, 7)
    assert decode_metadata(encode_metadata(m)) == m
    watcher = MemberMetadata("solo-h-1", Endpoint("h", 9092), solo_since_ms=1_795_000_000_000, solo_candidate=True)
    assert decode_metadata(encode_metadata(watcher)) == watcher
    fresh = MemberMetadata("kcoord-1", Endpoint("kc-1.kc", 9092), fresh=True)
    assert decode_metadata(encode_metadata(fresh)) == fresh
    a = Assignment(7, frozenset({1, 3}), {1: "kcoord-0", 3: "kcoord-0", 2: "kcoord-1"},
                   {"kcoord-0": Endpoint("kc-0.kc", 9092), "kcoord-1": Endpoint("kc-1.kc", 9092)},
                   {"kcoord-0": 1 << 30, "kcoord-1": (1 << 30) + 1}, hold=frozenset({3}))
    assert decode_assignment(encode_assignment(a)) == a


def test_an_older_kcoord_s_bytes_read_as_serving_not_fresh_and_without_holds():
    """A watcher of an older kcoord joined only once it served; an older member has no
    `fresh`, and an older leader marks no hold."""
    body = {"instance_id": "solo-h-1", "host": "h", "port": 1, "solo_since_ms": 5}
    m = decode_metadata(b"\x00\x01" + orjson.dumps(body))
    assert (m.solo_candidate, m.fresh) == (False, False)
    assert decode_assignment(b"\x00\x01" + orjson.dumps({"generation": 1, "shards": [2]})).hold == frozenset()


def test_bad_flags_and_holds_are_named():
    base = {"instance_id": "a", "host": "h", "port": 1}
    for key in ("fresh", "solo_candidate"):
        with pytest.raises(MalformedMembershipData, match=f"'{key}' must be true or false"):
            decode_metadata(b"\x00\x01" + orjson.dumps({**base, key: 1}))
    with pytest.raises(MalformedMembershipData, match="'hold' names shards not assigned: \\[4\\]"):
        decode_assignment(b"\x00\x01" + orjson.dumps({"generation": 1, "shards": [2], "hold": [2, 4]}))


def test_a_newer_version_with_more_fields_is_read():
    body = orjson.loads(encode_metadata(MemberMetadata("a", Endpoint("h", 1)))[2:])
    body["future"] = {"x": 1}
    assert decode_metadata(struct.pack(">h", 9) + orjson.dumps(body)).instance_id == "a"


@pytest.mark.parametrize("data, names", [
    (b"", "too short"),
    (b"\x00\x00{}", "version 0"),
    (b"\x00\x01[1]", "expected an object"),
    (b"\x00\x01{", "not JSON"),
    (b"\x00\x01" + orjson.dumps({"instance_id": "a", "host": "h", "port": 0}), "'port'"),
    (b"\x00\x01" + orjson.dumps({"instance_id": "", "host": "h", "port": 1}), "'instance_id'"),
    (b"\x00\x01" + orjson.dumps({"instance_id": "a", "host": "h", "port": 1, "owned": [-1]}), "'owned'"),
    (b"\x00\x01" + orjson.dumps({"instance_id": "a", "host": "h", "port": 1, "owned": [True]}), "'owned'"),
    (b"\x00\x01" + orjson.dumps({"instance_id": "a" * 5000, "host": "h", "port": 1}), "'instance_id'"),
])
def test_bad_metadata_names_the_problem(data, names):
    with pytest.raises(MalformedMembershipData, match=names):
        decode_metadata(data)


def test_bad_assignment_names_the_problem():
    with pytest.raises(MalformedMembershipData, match="owners key"):
        decode_assignment(b"\x00\x01" + orjson.dumps({"generation": 1, "owners": {"x": "a"}}))
    with pytest.raises(MalformedMembershipData, match="without an endpoint"):
        decode_assignment(b"\x00\x01" + orjson.dumps({"generation": 1, "owners": {"0": "a"}}))
    with pytest.raises(MalformedMembershipData, match="over the"):
        decode_assignment(b"\x00\x01" + b" " * (1 << 21))


def test_random_bytes_only_ever_raise_the_checked_error():
    rng = random.Random(7)
    ports = {"PLAINTEXT": ListenerPorts("h", 1, {1: 2, 3: 4}), "EXTERNAL": ListenerPorts("x", 9, {1: 10})}
    seeds = [encode_metadata(MemberMetadata("a", Endpoint("h", 1), owned=frozenset({1, 2}))),
             encode_metadata(MemberMetadata("a", Endpoint("h", 1, ports))),
             encode_assignment(Assignment(1, frozenset({1}), {1: "a"}, {"a": Endpoint("h", 1, ports)}, {"a": 1 << 30}))]
    for _ in range(3000):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            op = rng.random()
            if op < 0.4 and data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            elif op < 0.7 and data:
                del data[rng.randrange(len(data)):][: rng.randint(1, 8)]
            else:
                data[rng.randrange(len(data) + 1):0] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        for decode in (decode_metadata, decode_assignment):
            try:
                decode(bytes(data))
            except MalformedMembershipData:
                pass


def test_listener_ports_round_trip_and_bad_ones_are_named():
    ports = {"PLAINTEXT": ListenerPorts("h", 9092, {1: 9093, 2: 9094}), "EXTERNAL": ListenerPorts("x", 9192, {})}
    m = MemberMetadata("kcoord-0", Endpoint("h", 9092, ports))
    assert decode_metadata(encode_metadata(m)) == m
    a = Assignment(2, frozenset({0}), {0: "kcoord-0"}, {"kcoord-0": Endpoint("h", 9092, ports)}, {"kcoord-0": 1 << 30})
    assert decode_assignment(encode_assignment(a)) == a
    base = {"instance_id": "a", "host": "h", "port": 1}
    for listeners, names in [
        ([], "'listeners'"),
        ({f"L{i}": {"host": "h", "port": 1} for i in range(17)}, "at most 16"),
        ({"L": "x"}, "must be an object"),
        ({"L": {"host": "h", "port": 1, "brokers": {"x": 2}}}, "not a node id"),
        ({"L": {"host": "h", "port": 1, "brokers": {"1": 70000}}}, "'brokers\\[1\\]'"),
        ({"L": {"host": "", "port": 1}}, "'host'"),
    ]:
        with pytest.raises(MalformedMembershipData, match=names):
            decode_metadata(b"\x00\x01" + orjson.dumps({**base, "listeners": listeners}))
