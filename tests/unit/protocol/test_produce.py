"""acks=0 detection at the start of a Produce body (no response may be awaited for it)."""
from __future__ import annotations

from datetime import timedelta

import pytest

from coordinator.protocol.apis import PRODUCE, request_class, request_header_version
from coordinator.protocol.codec import encode_body
from coordinator.protocol.framing import HeaderError, RequestHeader, frame, request_body_offset
from coordinator.protocol.produce import produce_acks


def produce_frame(version: int, acks: int, transactional_id: str | None) -> bytes:
    body = encode_body(request_class(PRODUCE, version)(
        transactional_id=transactional_id, acks=acks, timeout=timedelta(seconds=30), topic_data=()))
    head = RequestHeader(PRODUCE, version, 1, "p").encode(request_header_version(PRODUCE, version))
    return frame(head + body)


@pytest.mark.parametrize("version", [3, 8, 9])
@pytest.mark.parametrize("acks", [0, 1, -1])
@pytest.mark.parametrize("transactional_id", [None, "", "txn-1"])
def test_acks_and_transactional_id(version: int, acks: int, transactional_id: str | None) -> None:
    data = produce_frame(version, acks, transactional_id)
    _, offset = request_body_offset(data, request_header_version(PRODUCE, version))
    assert produce_acks(data, offset, version >= 9) == (transactional_id, acks)


def test_truncated_produce_body_raises() -> None:
    data = produce_frame(8, 0, "txn-1")
    _, offset = request_body_offset(data, 1)
    with pytest.raises(HeaderError):
        produce_acks(data[:offset + 4], offset, False)
