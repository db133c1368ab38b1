"""KIP-951 leader discovery in forwarded Produce (v10+) and Fetch (v16+) responses.

A partition answered NOT_LEADER_OR_FOLLOWER (or FENCED_LEADER_EPOCH for Fetch) names its new
leader, and the response's top-level tagged field 0, NodeEndpoints, gives that node's
host and port so the client can go there without a Metadata round trip. Those are upstream
addresses: a client that used them would bypass the gateway. So the gateway rewrites them,
as it rewrites Metadata (rewrite.py): each endpoint gets the address of the gateway
listener fronting that node id (`address_of`, the same mapping), node ids unchanged.

Rules:
- Only NodeEndpoints holds addresses. The per-partition CurrentLeader (tagged) is a node id
  and an epoch, which the client resolves through the endpoints or its metadata: kept.
- The body is walked, bounded, decoding nothing but lengths and counts (records are skipped
  by their length), to find the top-level tagged section at its end. A response without tag
  0 (every response without a leader change) passes byte for byte, and so does one whose
  tag 0 names no endpoint (an empty list: Tansu writes it into every answer); otherwise only
  that tail is rebuilt (each endpoint's rack and own tagged fields kept, other tags kept in
  order) and the size prefix adjusted. Rebuilding copies the whole frame, records included.
- The common answer first (`_plain_fetch`, `_plain_produce`): Kafka fills NodeEndpoints only
  for partitions that answer NOT_LEADER_OR_FOLLOWER (Produce, Fetch) or FENCED_LEADER_EPOCH
  (Fetch), and gives each such partition its CurrentLeader, a tagged field of the partition
  (KIP-951; KafkaApis): the usual answer, no leader change, has every tagged section empty.
  The section cannot be found from the end (its count comes first, and what precedes it,
  records or strings, may end in any bytes), so the fast check still goes forward partition
  by partition, but on that common shape only: one-byte counts, empty tagged sections,
  records skipped by their length, in one loop with no call per field. It passes the frame
  only when the top-level section ends it and names no endpoint (`_plain_tail`); anything
  else (a tag anywhere, a longer count, a bound crossed) leaves the decision to the full
  walk. So it passes only what the walk would pass unchanged (fuzzed against it:
  fuzz/atheris_endpoints.py), and decides nothing on error codes.
- Anything that does not parse raises BodyError naming the API, version and byte offset;
  the forward link then closes the client's connection (forward.py), as for any upstream
  answer it cannot rewrite. Fuzzed: fuzz/atheris_endpoints.py.
- Which versions carry the field: PRODUCE_ENDPOINTS_FROM and FETCH_ENDPOINTS_FROM (Kafka's
  ProduceResponse.json / FetchResponse.json); REWRITTEN_MAX are the newest versions whose
  shape this walker knows (Produce v13 names topics by id, KIP-516).
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Mapping

from ..protocol.apis import FETCH, PRODUCE, intersect, kio_version_range
from ..protocol.codec import BodyError
from ..protocol.framing import decode_response_header, write_uvarint

AddressOf = Callable[[int, str, int], tuple[str, int]]

PRODUCE_ENDPOINTS_FROM = 10
FETCH_ENDPOINTS_FROM = 16
# Newest versions walked here: forwarded up to these (and what upstream and kio support).
REWRITTEN_MAX = {PRODUCE: 13, FETCH: 18}
NODE_ENDPOINTS_TAG = 0

_I32 = struct.Struct(">i")     # node ids, ports, the frame's size prefix


class _Bad(Exception):
    def __init__(self, what: str, pos: int) -> None:
        super().__init__(what)
        self.what, self.pos = what, pos


def carries_endpoints(api_key: int, api_version: int) -> bool:
    """Whether responses of this API version may carry NodeEndpoints (and are walked)."""
    if api_key == PRODUCE:
        return api_version >= PRODUCE_ENDPOINTS_FROM
    if api_key == FETCH:
        return api_version >= FETCH_ENDPOINTS_FROM
    return False


def forwarded_versions(advertised: Mapping[int, tuple[int, int]],
                       upstream: Mapping[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """`advertised` (api_versions.advertised_versions) with Produce and Fetch forwarded up to
    REWRITTEN_MAX, within upstream's and kio's ranges: their NodeEndpoints are rewritten
    here, so the protocol table's address caps (apis.FORWARD_VERSION_CAPS, for responses
    nobody rewrites) do not apply to them. An API not advertised stays so."""
    out = dict(advertised)
    for api_key, top in REWRITTEN_MAX.items():
        current, theirs, known = out.get(api_key), upstream.get(api_key), kio_version_range(api_key)
        if current is None or theirs is None or known is None:
            continue
        both = intersect(theirs, known)
        lifted = intersect(both, (current[0], top)) if both is not None else None
        if lifted is not None:
            out[api_key] = lifted
    return out


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    start = pos
    while True:
        if pos >= end:
            raise _Bad("truncated varint", start)
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise _Bad("varint longer than 5 bytes", start)


def _skip(pos: int, n: int, end: int, what: str) -> int:
    if n > end - pos:
        raise _Bad(f"{what}: needs {n} bytes, {end - pos} left", pos)
    return pos + n


def _count(buf: bytes, pos: int, end: int, what: str, nullable: bool = False) -> tuple[int, int]:
    """A compact array's element count (0 for null when `nullable`). Every element takes at
    least one byte, so a count above the bytes left is malformed before any is read."""
    n, pos = _uvarint(buf, pos, end)
    if n == 0:
        if nullable:
            return 0, pos
        raise _Bad(f"{what}: non-nullable array serialized as null", pos - 1)
    if n - 1 > end - pos:
        raise _Bad(f"{what}: {n - 1} elements declared, {end - pos} bytes left", pos)
    return n - 1, pos


def _skip_blob(buf: bytes, pos: int, end: int, what: str, nullable: bool) -> int:
    n, at = _uvarint(buf, pos, end)
    if n == 0:
        if nullable:
            return at
        raise _Bad(f"{what}: non-nullable field serialized as null", pos)
    return _skip(at, n - 1, end, what)


def _skip_tags(buf: bytes, pos: int, end: int, what: str) -> int:
    count, pos = _uvarint(buf, pos, end)
    if count * 2 > end - pos:
        raise _Bad(f"{what}: {count} tagged fields declared, {end - pos} bytes left", pos)
    for _ in range(count):
        _, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        pos = _skip(pos, size, end, f"{what} tagged field")
    return pos


def _produce_tail(buf: bytes, pos: int, end: int, version: int) -> int:
    """The offset of ProduceResponse's top-level tagged fields."""
    topics, pos = _count(buf, pos, end, "responses")
    for _ in range(topics):
        if version >= 13:
            pos = _skip(pos, 16, end, "topic_id")
        else:
            pos = _skip_blob(buf, pos, end, "name", False)
        partitions, pos = _count(buf, pos, end, "partition_responses")
        for _ in range(partitions):
            # index, error_code, base_offset, log_append_time, log_start_offset
            pos = _skip(pos, 4 + 2 + 8 + 8 + 8, end, "partition")
            errors, pos = _count(buf, pos, end, "record_errors")
            for _ in range(errors):
                pos = _skip(pos, 4, end, "batch_index")
                pos = _skip_blob(buf, pos, end, "batch_index_error_message", True)
                pos = _skip_tags(buf, pos, end, "record error")
            pos = _skip_blob(buf, pos, end, "error_message", True)
            pos = _skip_tags(buf, pos, end, "partition")
        pos = _skip_tags(buf, pos, end, "topic")
    return _skip(pos, 4, end, "throttle_time_ms")


def _fetch_tail(buf: bytes, pos: int, end: int, version: int) -> int:
    """The offset of FetchResponse's (v16-18) top-level tagged fields."""
    pos = _skip(pos, 4 + 2 + 4, end, "throttle_time_ms, error_code, session_id")
    topics, pos = _count(buf, pos, end, "responses")
    for _ in range(topics):
        pos = _skip(pos, 16, end, "topic_id")
        partitions, pos = _count(buf, pos, end, "partitions")
        for _ in range(partitions):
            # partition_index, error_code, high_watermark, last_stable_offset, log_start_offset
            pos = _skip(pos, 4 + 2 + 8 + 8 + 8, end, "partition")
            aborted, pos = _count(buf, pos, end, "aborted_transactions", nullable=True)
            for _ in range(aborted):
                pos = _skip(pos, 16, end, "aborted transaction")
                pos = _skip_tags(buf, pos, end, "aborted transaction")
            pos = _skip(pos, 4, end, "preferred_read_replica")
            pos = _skip_blob(buf, pos, end, "records", True)
            pos = _skip_tags(buf, pos, end, "partition")
        pos = _skip_tags(buf, pos, end, "topic")
    return pos


def _string(buf: bytes, pos: int, end: int, what: str) -> tuple[str, int]:
    n, at = _uvarint(buf, pos, end)
    if n == 0:
        raise _Bad(f"{what}: non-nullable string serialized as null", pos)
    stop = _skip(at, n - 1, end, what)
    try:
        return buf[at:stop].decode("utf-8"), stop
    except UnicodeDecodeError:
        raise _Bad(f"{what}: not UTF-8", at) from None


def _rewrite_endpoints(data: bytes, address_of: AddressOf) -> bytes:
    """NodeEndpoints (a compact array of node_id, host, port, rack, tagged fields) with each
    host and port replaced by the gateway's address for that node."""
    end = len(data)
    count, pos = _count(data, 0, end, "node_endpoints")
    out = [write_uvarint(count + 1)]
    for _ in range(count):
        pos = _skip(pos, 4, end, "node_id")
        (node_id,) = _I32.unpack_from(data, pos - 4)
        host, pos = _string(data, pos, end, "host")
        pos = _skip(pos, 4, end, "port")
        (port,) = _I32.unpack_from(data, pos - 4)
        kept = pos
        pos = _skip_blob(data, pos, end, "rack", True)
        pos = _skip_tags(data, pos, end, "node endpoint")
        new_host, new_port = address_of(node_id, host, port)
        encoded = new_host.encode("utf-8")
        out += [_I32.pack(node_id), write_uvarint(len(encoded) + 1), encoded, _I32.pack(new_port),
                data[kept:pos]]
    if pos != end:
        raise _Bad(f"node_endpoints: {end - pos} bytes after the last endpoint", pos)
    return b"".join(out)


def body_offset(frame: bytes, header_version: int) -> int:
    """Where the body of a framed response starts: decode_response_header's offset, without
    building the header when its tagged section is empty (the one byte 0 after the
    correlation id), as upstream answers have it."""
    if header_version >= 1 and len(frame) > 8 and frame[8] == 0:
        return 9
    return decode_response_header(frame, header_version)[1]


_EMPTY_ENDPOINTS = b"\x01\x00\x01\x01"   # one tagged field: tag 0, one byte, an empty array


def _plain_tail(buf: bytes, pos: int) -> bool:
    """Whether the top-level tagged section at `pos` ends the frame and names no endpoint: no
    field (as Kafka writes it), or NodeEndpoints alone and empty (Tansu sends it so with every
    answer)."""
    left = len(buf) - pos
    if left == 1:
        return buf[pos] == 0
    return left == 4 and buf[pos:] == _EMPTY_ENDPOINTS


def _plain_fetch(buf: bytes, pos: int) -> bool:
    """Whether a Fetch v16-18 body at `pos` has the common shape, every tagged section empty,
    and ends the frame. False means "walk it", not "malformed"."""
    try:
        pos += 10                              # throttle_time_ms, error_code, session_id
        topics = buf[pos] - 1                  # compact arrays: count + 1, one byte below 128
        if topics < 0 or topics > 126:
            return False
        pos += 1
        for _ in range(topics):
            partitions = buf[pos + 16] - 1     # after topic_id
            if partitions < 0 or partitions > 126:
                return False
            pos += 17
            for _ in range(partitions):
                # partition_index, error_code, high_watermark, last_stable_offset,
                # log_start_offset (30 bytes), then aborted_transactions: null (0) or count + 1
                aborted = buf[pos + 30]
                if aborted < 2:
                    pos += 35                  # ... and preferred_read_replica
                else:
                    if aborted > 127:
                        return False
                    pos += 31
                    for _ in range(aborted - 1):
                        if buf[pos + 16]:      # producer_id, first_offset, then its tagged fields
                            return False
                        pos += 17
                    pos += 4
                byte = buf[pos]                # records: null (0) or length + 1, a varint
                if byte < 0x80:
                    pos += byte or 1
                else:
                    pos += 1
                    size = byte & 0x7F
                    shift = 7
                    while byte > 0x7F:
                        if shift > 28:
                            return False
                        byte = buf[pos]
                        pos += 1
                        size |= (byte & 0x7F) << shift
                        shift += 7
                    if size:                   # an overlong 0 is null too, as the walk reads it
                        pos += size - 1
                if buf[pos]:                   # CurrentLeader, DivergingEpoch, SnapshotId
                    return False
                pos += 1
            if buf[pos]:                       # the topic's tagged fields
                return False
            pos += 1
        return _plain_tail(buf, pos)
    except IndexError:                         # a length past the end: the walk says where
        return False


def _plain_produce(buf: bytes, pos: int, version: int) -> bool:
    """`_plain_fetch` for a Produce v10-13 body."""
    try:
        topics = buf[pos] - 1
        if topics < 0 or topics > 126:
            return False
        pos += 1
        for _ in range(topics):
            if version >= 13:
                pos += 16                      # topic_id
            else:
                n = buf[pos]                   # name: length + 1, never null
                if n == 0 or n > 127:
                    return False
                pos += n
            partitions = buf[pos] - 1
            if partitions < 0 or partitions > 126:
                return False
            pos += 1
            for _ in range(partitions):
                # index, error_code, base_offset, log_append_time_ms, log_start_offset
                pos += 30
                if buf[pos] != 1:              # record_errors: empty
                    return False
                n = buf[pos + 1]               # error_message: null (0) or length + 1
                if n > 127:
                    return False
                pos += n + 1 if n else 2
                if buf[pos]:                   # CurrentLeader
                    return False
                pos += 1
            if buf[pos]:
                return False
            pos += 1
        pos += 4                               # throttle_time_ms
        return _plain_tail(buf, pos)
    except IndexError:
        return False


def rewrite_leader_endpoints(api_key: int, api_version: int, frame: bytes, body_offset: int,
                             address_of: AddressOf) -> bytes:
    """`frame` (size prefix, header, body at `body_offset`) with NodeEndpoints' addresses
    replaced by the gateway's; the same object when it has none."""
    if api_key == PRODUCE:
        if _plain_produce(frame, body_offset, api_version):
            return frame
    elif _plain_fetch(frame, body_offset):
        return frame
    return walk_leader_endpoints(api_key, api_version, frame, body_offset, address_of)


def walk_leader_endpoints(api_key: int, api_version: int, frame: bytes, body_offset: int,
                          address_of: AddressOf) -> bytes:
    """rewrite_leader_endpoints by the full walk alone (what the fast check defers to)."""
    end = len(frame)
    try:
        if api_key == PRODUCE:
            pos = _produce_tail(frame, body_offset, end, api_version)
        else:
            pos = _fetch_tail(frame, body_offset, end, api_version)
        tail = pos
        count, pos = _uvarint(frame, pos, end)
        if count * 2 > end - pos:
            raise _Bad(f"{count} tagged fields declared, {end - pos} bytes left", pos)
        fields = []
        found = False
        for _ in range(count):
            tag, pos = _uvarint(frame, pos, end)
            size, pos = _uvarint(frame, pos, end)
            stop = _skip(pos, size, end, f"tagged field {tag}")
            fields.append((tag, pos, frame[pos:stop]))
            found = found or tag == NODE_ENDPOINTS_TAG
            pos = stop
        if pos != end:
            raise _Bad(f"{end - pos} bytes after the response's tagged fields", pos)
        if not found:
            return frame
        parts = [write_uvarint(count)]
        changed = False
        for tag, start, data in fields:
            if tag == NODE_ENDPOINTS_TAG:
                try:
                    rewritten = _rewrite_endpoints(data, address_of)
                except _Bad as e:
                    raise _Bad(e.what, start + e.pos) from None
                changed = changed or rewritten != data
                data = rewritten
            parts += [write_uvarint(tag), write_uvarint(len(data)), data]
    except _Bad as e:
        raise BodyError(f"{e.what} at byte {e.pos} of the frame") from None
    if not changed:     # no endpoint (an empty list) or already the gateway's: no copy of the frame
        return frame
    rebuilt = frame[4:tail] + b"".join(parts)
    return _I32.pack(len(rebuilt)) + rebuilt
