"""In-process coverage-guided fuzzing of a forwarded Produce's guard with atheris: the read,
walk, record checks and state-topic split of coordinator/gateway/state_guard.py and
produce_check.py, for a Produce walked at once (up to max_decoded_request_bytes) and for one
above that bound (read within MAX_NAMED_PARTITIONS first, then walked).

    .venv/bin/python fuzz/atheris_produce_guard.py -runs=500000 -rss_limit_mb=2048 \
        -malloc_limit_mb=1024 -artifact_prefix=/tmp/

Each input picks a Produce version (3, 7, 8, 9, 12, 13), topics (0-4, named from a pool that
holds the state topic; from v13 ids, the state topic's among them) with 0-4 partitions each,
whose records are null, empty, a real batch, one with a bad CRC or the fuzzer's bytes; then
the body is mutated: bytes flipped, cut, an int overwritten by an extreme, bytes appended.
MAX_NAMED_PARTITIONS is lowered to 6 so the bound is reached.

Invariants (a violation raises AssertionError, a crash), with the record checks on and off:
- the guard answers (acks, decision) or raises BodyError; nothing else escapes;
- the frame above the bound is answered exactly as the same frame walked at once, or refused
  (TooLarge when walked at once it is answered), or closed where walked at once it is
  decoded (answered per partition, or the state topic's name or id in its bytes: it is never
  decoded above the bound): the bound changes nothing else, and no body the walk refuses
  goes up;
- a refused batch or the state topic named is answered per partition (Local or Split), a
  Produce naming neither goes up whole (None).
An allocation past -malloc_limit_mb (kio allocates whatever a length claims) is a crash too.
"""
from __future__ import annotations

import struct
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.instrumented import atheris, instrumented  # noqa: E402
from records.batch import build_batch  # noqa: E402

# Without atheris `one` is also driven by tests/unit/gateway/test_produce_guard_fuzz.py.
with instrumented():
    from coordinator.gateway import produce_check  # noqa: E402
    from coordinator.gateway.state_guard import Close, Local, Split, StateTopicGuard  # noqa: E402
    from coordinator.protocol.apis import PRODUCE, request_class, request_header_version  # noqa: E402
    from coordinator.protocol.codec import BodyError, encode_body  # noqa: E402
    from coordinator.protocol.framing import RequestHeader, frame  # noqa: E402

BOUND = 6      # MAX_NAMED_PARTITIONS while the harness runs (read at each call): within reach
VERSIONS = (3, 7, 8, 9, 12, 13)
STATE, STATE_ID = "__kcoord_offsets", uuid.UUID(int=0x5EED)
NAMES = (STATE, "orders", "a", "Aa", "BB", "x" * 300)
IDS = (STATE_ID, uuid.UUID(int=1), uuid.UUID(int=(7 << 64) | 7), uuid.UUID(int=2**128 - 1))
BATCH = build_batch([(b"k", b"v")], timestamp_ms=1_700_000_000_000)
BAD_CRC = BATCH[:-1] + bytes([BATCH[-1] ^ 0xFF])
EXTREMES = (0, 1, -1, 2, 0x7FFF, 0x8000, 2**31 - 1, -2**31, 13, 255)
CHECKS = produce_check.RecordChecks(max_message_bytes=2**31 - 1, verify_crc=True)
WALKED = StateTopicGuard(STATE, lambda: STATE_ID, lambda: True)
ABOVE = StateTopicGuard(STATE, lambda: STATE_ID, lambda: True, max_walked_frame=10)


class _Input:
    """The fuzzer's bytes, read as small choices; past their end every choice is 0."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def pick(self, n: int) -> int:
        if self.at >= len(self.data):
            return 0
        self.at += 1
        return self.data[self.at - 1] % n

    def take(self, n: int) -> bytes:
        out = self.data[self.at:self.at + n]
        self.at += n
        return out


def _request(fuzz: _Input) -> tuple[bytes, int, int]:
    """(frame, body offset, version) of a Produce built from the input."""
    version = VERSIONS[fuzz.pick(len(VERSIONS))]
    cls = request_class(PRODUCE, version)
    m = sys.modules[cls.__module__]
    topics = []
    for _ in range(fuzz.pick(5)):
        parts = []
        for _ in range(fuzz.pick(5)):
            kind = fuzz.pick(5)
            records = (None, b"", BATCH, BAD_CRC, fuzz.take(fuzz.pick(70)))[kind]
            parts.append(m.PartitionProduceData(index=fuzz.pick(8), records=records))
        key = {"topic_id": IDS[fuzz.pick(len(IDS))]} if version >= 13 else {"name": NAMES[fuzz.pick(len(NAMES))]}
        topics.append(m.TopicProduceData(partition_data=tuple(parts), **key))
    body = cls(transactional_id=None, acks=(-1, 1, 0)[fuzz.pick(3)], timeout=timedelta(0), topic_data=tuple(topics))
    head = RequestHeader(PRODUCE, version, 7, "c").encode(request_header_version(PRODUCE, version))
    return frame(head + encode_body(body)), len(head) + 4, version


def _mutated(data: bytes, offset: int, fuzz: _Input) -> bytes:
    body = bytearray(data[offset:])
    for _ in range(fuzz.pick(4)):
        how, at = fuzz.pick(4), (fuzz.pick(256) * 256 + fuzz.pick(256)) % max(1, len(body))
        if how == 0 and body:
            body[at] = fuzz.pick(256)
        elif how == 1:
            del body[at:]
        elif how == 2 and len(body) >= at + 4:      # a count, length or int16 set to an extreme
            value = EXTREMES[fuzz.pick(len(EXTREMES))]
            if fuzz.pick(2):
                struct.pack_into(">i", body, at, value)
            else:
                struct.pack_into(">h", body, at, max(-2**15, min(2**15 - 1, value)))
        elif how == 3:
            body += fuzz.take(fuzz.pick(40))
    return frame(data[4:offset] + bytes(body))


def _outcome(guard: Any, data: bytes, offset: int, version: int, checks: Any) -> Any:
    """What the guard did, comparable: ("refused", type) or (acks, the decision's content)."""
    kept, produce_check.MAX_NAMED_PARTITIONS = produce_check.MAX_NAMED_PARTITIONS, BOUND
    try:
        acks, decision = guard.produce(data, version, offset, checks)
    except BodyError as e:
        return ("refused", type(e).__name__)
    finally:
        produce_check.MAX_NAMED_PARTITIONS = kept
    if isinstance(decision, Split):
        return (acks, "split", decision.frame, decision.note)
    if isinstance(decision, Local):
        return (acks, "local", decision.response, decision.note)
    if isinstance(decision, Close):
        return (acks, "close", decision.reason)
    assert decision is None, decision
    return (acks, None)


def one(data: bytes) -> str:
    """The input's outcome: forwarded, closed (answered per partition at once), too large or refused."""
    fuzz = _Input(data)
    built, offset, version = _request(fuzz)
    mutated = _mutated(built, offset, fuzz) if fuzz.pick(4) else built
    result = "refused"
    for checks in (CHECKS, None):
        walked = _outcome(WALKED, mutated, offset, version, checks)
        above = _outcome(ABOVE, mutated, offset, version, checks)
        if walked[0] == "refused":     # above the bound a refusal found only by the decode is a Close
            assert above[0] == "refused" or above[1] == "close", f"refused walked at once, not above: {above!r}"
        elif above != walked:
            if above[1] == "close" and (walked[1] in ("local", "split", "close") or STATE.encode() in mutated
                                        or (version >= 13 and STATE_ID.bytes in mutated)):
                result = "closed"     # never decoded above the bound: what walked at once is decoded closes
                continue
            assert above == ("refused", "TooLarge"), f"above the bound {above!r}, walked at once {walked!r}"
            result = "too large"
        elif checks is CHECKS:
            assert walked[1] is None, walked      # anything else is decoded at once, closed above the bound
            result = "forwarded"
        if mutated is built:      # a Produce kio built parses: refused only for its keys
            assert walked[0] != "refused" or walked[1] == "RepeatedKeys", walked
    return result


if __name__ == "__main__":
    atheris.Setup(sys.argv, lambda data: one(bytes(data)))
    atheris.Fuzz()
