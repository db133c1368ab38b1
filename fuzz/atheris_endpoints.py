"""In-process coverage-guided fuzzing with atheris of the gateway's KIP-951 rewrite of forwarded
Produce (v10-13) and Fetch (v16-18) responses (coordinator/gateway/leader_endpoints.py): the
bytes an upstream broker answers, walked to their NodeEndpoints.

    .venv/bin/python fuzz/atheris_endpoints.py -runs=500000 -rss_limit_mb=2048

The first byte picks the API version; the second how the rest is used: as a whole frame body,
spliced into a valid answer that carries endpoints (so the fuzzer starts deep inside the walk),
as the endpoints' own bytes, or spliced into a valid answer of the common shape, no leader
change, without tag 0 or with it empty as Tansu sends it (so it starts on the fast check's
side), its end cut by 0-3 bytes. The expected outcomes are a frame or
BodyError. A rewritten frame must be a fixed point (rewriting it again changes nothing: every
address is already the gateway's) whose size prefix matches its length. And the fast check
never changes an outcome: rewrite_leader_endpoints and the full walk alone
(walk_leader_endpoints) return equal frames, or refuse with the same message.
"""
from __future__ import annotations

import datetime
import importlib
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import atheris  # noqa: E402

with atheris.instrument_imports():
    from coordinator.gateway.leader_endpoints import rewrite_leader_endpoints, walk_leader_endpoints  # noqa: E402
    from coordinator.protocol.codec import BodyError, encode_response_frame  # noqa: E402

from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.types import BrokerId, ProducerId, TopicName  # noqa: E402
from kio.static.primitive import i32, i32Timedelta, i64  # noqa: E402

from coordinator.protocol.apis import FETCH, PRODUCE, response_class  # noqa: E402

VERSIONS = [(PRODUCE, v) for v in (10, 11, 12, 13)] + [(FETCH, v) for v in (16, 17, 18)]
ZERO = i32Timedelta.parse(datetime.timedelta(0))
HEADER = 9      # size, correlation id, empty header tagged fields (response header v1)


def _address_of(node_id: int, host: str, port: int) -> tuple[str, int]:
    return "gw", 9000 + (node_id & 0xFF)


def _valid(api_key: int, version: int, moved: bool = True) -> bytes:
    """An answer with one topic, one moved partition and two endpoints; or, not `moved`, the
    common answer: two partitions, no leader change, every tagged section empty."""
    m = importlib.import_module(response_class(api_key, version).__module__)
    nodes = (m.NodeEndpoint(node_id=BrokerId(2), host="b2", port=i32(9094), rack="r"),
             m.NodeEndpoint(node_id=BrokerId(1), host="b1", port=i32(9093), rack=None)) if moved else ()
    error = ErrorCode.not_leader_or_follower if moved else ErrorCode.none
    count = 1 if moved else 2
    if api_key == PRODUCE:
        topic = {"topic_id": uuid.UUID(int=1)} if version >= 13 else {"name": TopicName("t")}
        parts = tuple(m.PartitionProduceResponse(index=i32(p), error_code=error, base_offset=i64(-1),
                                                 record_errors=(), error_message=None if p == 0 else "m")
                      for p in range(count))
        body = response_class(api_key, version)(
            responses=(m.TopicProduceResponse(**topic, partition_responses=parts),), throttle_time=ZERO,
            node_endpoints=nodes)
    else:
        parts = tuple(m.PartitionData(partition_index=i32(p), error_code=error, high_watermark=i64(-1),
                                      aborted_transactions=None if p == 0 else (
                                          m.AbortedTransaction(producer_id=ProducerId(1), first_offset=i64(2)),),
                                      records=b"rr" * (1 + 100 * p))
                      for p in range(count))
        body = response_class(api_key, version)(
            throttle_time=ZERO, error_code=ErrorCode.none, session_id=i32(0),
            responses=(m.FetchableTopicResponse(topic_id=uuid.UUID(int=1), partitions=parts),),
            node_endpoints=nodes)
    return encode_response_frame(api_key, version, 1, body)


def _with_empty_endpoints(frame: bytes) -> bytes:
    """`frame` (top-level tagged section empty) with tag 0 present and empty, as Tansu answers."""
    body = frame[4:-1] + b"\x01\x00\x01\x01"
    return len(body).to_bytes(4, "big") + body


VALID = {key: _valid(*key) for key in VERSIONS}
PLAIN = {key: _valid(*key, moved=False) for key in VERSIONS}
TANSU = {key: _with_empty_endpoints(frame) for key, frame in PLAIN.items()}


def _frame(body: bytes) -> bytes:
    return (len(body) + 5).to_bytes(4, "big") + b"\x00\x00\x00\x01\x00" + body


def _outcome(rewrite, api_key: int, version: int, frame: bytes) -> tuple[str, object]:
    try:
        return "frame", rewrite(api_key, version, frame, HEADER, _address_of)
    except BodyError as e:
        return "refused", str(e)


def one(data: bytes) -> None:
    if len(data) < 2:
        return
    api_key, version = VERSIONS[data[0] % len(VERSIONS)]
    mode, common, rest = data[1] % 4, PLAIN if data[1] & 4 else TANSU, data[2:]
    if mode == 0:
        frame = _frame(rest)
    elif mode == 1:      # a slice of a valid answer replaced by the fuzzer's bytes
        valid = VALID[(api_key, version)]
        at = HEADER + (int.from_bytes(rest[:2], "big") % (len(valid) - HEADER) if len(rest) >= 2 else 0)
        cut = rest[2:3][0] if len(rest) >= 3 else 0
        frame = _frame(valid[HEADER:at] + rest[3:] + valid[at + cut:])
    elif mode == 3:      # the same in the common answer, and 0-3 bytes off its end (so a
        # length that lies by a byte or two can line up with the end, as the fast check tests)
        valid = common[(api_key, version)]
        at = HEADER + (int.from_bytes(rest[:2], "big") % (len(valid) - HEADER) if len(rest) >= 2 else 0)
        cut, drop = (rest[2] & 0x3F, rest[2] >> 6) if len(rest) >= 3 else (0, 0)
        body = valid[HEADER:at] + rest[3:] + valid[at + cut:]
        frame = _frame(body[:len(body) - drop])
    else:                # the endpoints' bytes themselves: no topics, then tag 0
        head = b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01" if api_key == FETCH else b"\x01\x00\x00\x00\x00"
        frame = _frame(head + b"\x01\x00" + len(rest).to_bytes(4, "big")[-1:] + rest)
    verdict = _outcome(rewrite_leader_endpoints, api_key, version, frame)
    assert verdict == _outcome(walk_leader_endpoints, api_key, version, frame), \
        "the fast check changed the outcome of the walk"
    if verdict[0] == "refused":
        return
    out = verdict[1]
    assert isinstance(out, bytes)
    again = rewrite_leader_endpoints(api_key, version, out, HEADER, _address_of)
    assert again == out, "a rewritten answer is a fixed point"
    if out != frame:
        assert int.from_bytes(out[:4], "big") == len(out) - 4, "the size prefix follows the rewrite"


if __name__ == "__main__":
    atheris.Setup(sys.argv, lambda data: one(bytes(data)))
    atheris.Fuzz()
