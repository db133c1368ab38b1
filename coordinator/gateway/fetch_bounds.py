"""Numbers of forwarded requests that an upstream sizes a buffer from, bounded as Kafka's
broker bounds them, before the request is forwarded.

Rules:
- DescribeTopicPartitions: Kafka answers at most ``max(min(response_partition_limit,
  max.request.partition.size.limit), 1)`` partitions (DescribeTopicPartitionsRequestHandler;
  the setting defaults to 2,000). Tansu 0.6 allocates ``response_partition_limit`` x 96
  bytes up front (the structured fuzzer's finding, fuzz/README.md: 4.8 GB for 50,000,000),
  so a limit outside 1..DESCRIBE_PARTITIONS_LIMIT is rewritten into it; in front of Kafka
  the answer is the same. The limit follows the topics array, so the array is stepped over
  (its names by their lengths, each entry's tagged fields by their sizes).
- Kafka answers a Fetch with at most ``min(max_bytes, fetch.max.bytes)`` bytes
  (KafkaApis.handleFetchRequest; fetch.max.bytes defaults to 55 MiB). An upstream that sizes
  a buffer from ``max_bytes`` must not be handed 2**31-1, so a larger value is rewritten to
  FETCH_MAX_BYTES before the request is forwarded: in front of Kafka the answer is the same.
- The common case costs one integer read and a comparison (the frame is forwarded as it
  is); only a Fetch over the bound is copied, with the four bytes replaced.
- ``partition_max_bytes`` and ``max_wait_ms`` are forwarded as sent: Kafka bounds neither by
  itself (a partition's bytes are bounded by the request's ``max_bytes``; a long wait holds
  only that request, and kcoord's own connection limits still apply).
- Runs after the bounded walk (protocol/checked.py), so the field is known to be there.
"""
from __future__ import annotations

import struct
from collections.abc import Callable

from ..protocol.framing import read_uvarint

FETCH_MAX_BYTES = 57_671_680          # Kafka's fetch.max.bytes default (55 MiB)
FIRST_MAX_BYTES = 3                   # FetchRequest.json: MaxBytes since v3
FIRST_NO_REPLICA_ID = 15              # KIP-903: ReplicaId moved to a tagged field

DESCRIBE_PARTITIONS_LIMIT = 2_000     # Kafka's max.request.partition.size.limit default

_I32 = struct.Struct(">i")


def fetch_clamp(version: int) -> Callable[[bytes, int], bytes] | None:
    """The clamp of a Fetch at ``version``: (frame, body offset) -> the frame to forward;
    None for versions without max_bytes."""
    if version < FIRST_MAX_BYTES:
        return None
    skip = 8 if version >= FIRST_NO_REPLICA_ID else 12      # [replica_id,] max_wait_ms, min_bytes
    read = _I32.unpack_from
    bound = _I32.pack(FETCH_MAX_BYTES)

    def clamp(frame: bytes, offset: int) -> bytes:
        at = offset + skip
        if read(frame, at)[0] <= FETCH_MAX_BYTES:
            return frame
        return frame[:at] + bound + frame[at + 4:]
    return clamp


def describe_partitions_clamp(frame: bytes, offset: int) -> bytes:
    """DescribeTopicPartitions v0 (flexible): topics (compact array of {compact string name,
    tagged fields}), then ``response_partition_limit`` (int32). The walk has checked every
    length, so the steps below stay inside the frame."""
    count, at = read_uvarint(frame, offset)
    for _ in range(count - 1):                    # compact array: n + 1
        length, at = read_uvarint(frame, at)      # compact string: n + 1
        at += length - 1
        tags, at = read_uvarint(frame, at)
        for _ in range(tags):
            _, at = read_uvarint(frame, at)
            size, at = read_uvarint(frame, at)
            at += size
    limit = _I32.unpack_from(frame, at)[0]
    if 1 <= limit <= DESCRIBE_PARTITIONS_LIMIT:
        return frame
    return frame[:at] + _I32.pack(max(1, min(limit, DESCRIBE_PARTITIONS_LIMIT))) + frame[at + 4:]
