"""The start of a Produce body: transactional_id then acks.

A Produce with acks=0 gets no response at all from the broker, so the gateway must not
wait for one (it would stall every later response on the connection). The whole body is
bounds-checked by the generic walk (checked.py, records skipped by their length) before
this is called, except a Produce above max_decoded_request_bytes (gateway/state_guard.py), so
this reads only the two fields it needs and holds the id to Kafka's 32,767 bytes.
"""
from __future__ import annotations

import struct

from .checked import MAX_STRING_LENGTH
from .framing import HeaderError, read_uvarint

_INT16 = struct.Struct(">h")
FIRST_FLEXIBLE = 9          # ProduceRequest.json "flexibleVersions": "9+"
FIRST_TOPIC_ID = 13         # KIP-516: v13 names topics by id only


def produce_acks(frame: bytes, body_offset: int, flexible: bool) -> tuple[str | None, int]:
    """(transactional_id, acks) of a framed Produce request (v3+; flexible from v9)."""
    pos = body_offset
    end = len(frame)
    if flexible:
        length, pos = read_uvarint(frame, pos)
        length -= 1                      # compact nullable string: 0 = null
    else:
        if end - pos < 2:
            raise HeaderError("Produce body truncated before transactional_id")
        (length,) = _INT16.unpack_from(frame, pos)
        pos += 2
    if not -1 <= length <= MAX_STRING_LENGTH:    # Kafka's reader: "had invalid length"; bounds the decode
        raise HeaderError(f"Produce transactional_id length {length}")
    transactional_id = None
    if length >= 0:
        if pos + length > end:
            raise HeaderError("Produce transactional_id runs past the end of the frame")
        transactional_id = frame[pos:pos + length].decode(errors="replace")
        pos += length
    if end - pos < 2:
        raise HeaderError("Produce body truncated before acks")
    (acks,) = _INT16.unpack_from(frame, pos)
    return transactional_id, acks
