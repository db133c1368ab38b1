"""In-process coverage-guided fuzzing with atheris of the gateway's KIP-951 rewrite of forwarded
Produce (v10-13) and Fetch (v16-18) responses (coordinator/gateway/leader_endpoints.py): the
bytes an upstream broker answers, walked to their NodeEndpoints.

    .venv/bin/python fuzz/atheris_endpoints.py -runs=500000 -rss_limit_mb=2048

The first byte picks the API version; the second how the rest is used: as a whole frame body,
spliced into a valid answer that carries endpoints (so the fuzzer starts deep inside the walk),
or as the endpoints' own bytes. The expected outcomes are a frame or BodyError. A rewritten
frame must be a fixed point (rewriting it again changes nothing: every address is already the
gateway's) whose size prefix matches its length.
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
    from coordinator.gateway.leader_endpoints import rewrite_leader_endpoints  # noqa: E402
    from coordinator.protocol.codec import BodyError, encode_response_frame  # noqa: E402

from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.types import BrokerId, TopicName  # noqa: E402
from kio.static.primitive import i32, i32Timedelta, i64  # noqa: E402

from coordinator.protocol.apis import FETCH, PRODUCE, response_class  # noqa: E402

VERSIONS = [(PRODUCE, v) for v in (10, 11, 12, 13)] + [(FETCH, v) for v in (16, 17, 18)]
ZERO = i32Timedelta.parse(datetime.timedelta(0))
HEADER = 9      # size, correlation id, empty header tagged fields (response header v1)


def _address_of(node_id: int, host: str, port: int) -> tuple[str, int]:
    return "gw", 9000 + (node_id & 0xFF)


def _valid(api_key: int, version: int) -> bytes:
    """An answer with one topic, one moved partition and two endpoints."""
    m = importlib.import_module(response_class(api_key, version).__module__)
    nodes = (m.NodeEndpoint(node_id=BrokerId(2), host="b2", port=i32(9094), rack="r"),
             m.NodeEndpoint(node_id=BrokerId(1), host="b1", port=i32(9093), rack=None))
    if api_key == PRODUCE:
        topic = {"topic_id": uuid.UUID(int=1)} if version >= 13 else {"name": TopicName("t")}
        part = m.PartitionProduceResponse(index=i32(0), error_code=ErrorCode.not_leader_or_follower,
                                          base_offset=i64(-1), record_errors=(), error_message=None)
        body = response_class(api_key, version)(
            responses=(m.TopicProduceResponse(**topic, partition_responses=(part,)),), throttle_time=ZERO,
            node_endpoints=nodes)
    else:
        part = m.PartitionData(partition_index=i32(0), error_code=ErrorCode.not_leader_or_follower,
                               high_watermark=i64(-1), aborted_transactions=None, records=b"rr")
        body = response_class(api_key, version)(
            throttle_time=ZERO, error_code=ErrorCode.none, session_id=i32(0),
            responses=(m.FetchableTopicResponse(topic_id=uuid.UUID(int=1), partitions=(part,)),),
            node_endpoints=nodes)
    return encode_response_frame(api_key, version, 1, body)


VALID = {key: _valid(*key) for key in VERSIONS}


def _frame(body: bytes) -> bytes:
    return (len(body) + 5).to_bytes(4, "big") + b"\x00\x00\x00\x01\x00" + body


def one(data: bytes) -> None:
    if len(data) < 2:
        return
    api_key, version = VERSIONS[data[0] % len(VERSIONS)]
    mode, rest = data[1] % 3, data[2:]
    valid = VALID[(api_key, version)]
    if mode == 0:
        frame = _frame(rest)
    elif mode == 1:      # a slice of a valid answer replaced by the fuzzer's bytes
        at = HEADER + (int.from_bytes(rest[:2], "big") % (len(valid) - HEADER) if len(rest) >= 2 else 0)
        cut = rest[2:3][0] if len(rest) >= 3 else 0
        frame = _frame(valid[HEADER:at] + rest[3:] + valid[at + cut:])
    else:                # the endpoints' bytes themselves: no topics, then tag 0
        head = b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01" if api_key == FETCH else b"\x01\x00\x00\x00\x00"
        frame = _frame(head + b"\x01\x00" + len(rest).to_bytes(4, "big")[-1:] + rest)
    try:
        out = rewrite_leader_endpoints(api_key, version, frame, HEADER, _address_of)
    except BodyError:
        return
    again = rewrite_leader_endpoints(api_key, version, out, HEADER, _address_of)
    assert again == out, "a rewritten answer is a fixed point"
    if out != frame:
        assert int.from_bytes(out[:4], "big") == len(out) - 4, "the size prefix follows the rewrite"


if __name__ == "__main__":
    atheris.Setup(sys.argv, lambda data: one(bytes(data)))
    atheris.Fuzz()
