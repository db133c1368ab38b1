"""Matching upstream responses to forwarded requests (acks=0 Produce answered or not)."""
from __future__ import annotations

import struct

from coordinator.gateway.forward import NoResponseExpected, Pending, UpstreamLink
from coordinator.gateway.routes import FORWARD, FORWARD_PRODUCE, Route

ROUTE = Route(FORWARD, 2, 9, 2, 1, True, None)
PRODUCE = Route(FORWARD_PRODUCE, 0, 9, 2, 1, True, None)


class FakeClient:
    def __init__(self) -> None:
        self.flushes = 0
        self.failures: list[str] = []

    def flush(self) -> None:
        self.flushes += 1

    def upstream_failed(self, reason: str) -> None:
        self.failures.append(reason)


def response(correlation_id: int, body: bytes = b"\x00") -> bytes:
    return struct.pack(">ii", 4 + len(body), correlation_id) + body


def link_with(*entries: Pending) -> tuple[UpstreamLink, FakeClient]:
    client = FakeClient()
    link = UpstreamLink(client, gateway=None)  # type: ignore[arg-type]
    for entry in entries:
        link.waiting.append(entry)
    return link, client


def test_responses_fill_slots_in_order_across_partial_reads() -> None:
    a, b = Pending(1, ROUTE), Pending(2, ROUTE)
    link, client = link_with(a, b)
    data = response(1, b"first") + response(2, b"second")
    link.data_received(data[:7])
    assert a.data is None
    link.data_received(data[7:])
    assert a.data == response(1, b"first") and b.data == response(2, b"second")
    assert client.flushes == 2 and not client.failures and not link.waiting


def test_acks_zero_without_answer_is_skipped() -> None:   # Kafka: no response for acks=0
    nothing, after = NoResponseExpected(5, PRODUCE), Pending(6, ROUTE)
    link, client = link_with(nothing, after)
    link.data_received(response(6))
    assert after.data == response(6) and not link.waiting and not client.failures


def test_acks_zero_answer_is_dropped() -> None:   # Tansu 0.6 answers acks=0 anyway
    nothing, after = NoResponseExpected(5, PRODUCE), Pending(6, ROUTE)
    link, client = link_with(nothing, after)
    link.data_received(response(5) + response(6))
    assert nothing.data is None and after.data == response(6) and not client.failures


def test_wrong_correlation_id_breaks_the_link() -> None:
    link, client = link_with(Pending(1, ROUTE))
    link.data_received(response(9))
    assert client.failures and "answered correlation id 9, expected 1" in client.failures[0]


def test_unsolicited_response_breaks_the_link() -> None:
    link, client = link_with()
    link.data_received(response(3))
    assert client.failures and "to no request" in client.failures[0]


def test_unanswered_acks_zero_entries_are_bounded() -> None:
    link, _ = link_with()
    for i in range(10_000):
        link.expect_nothing(NoResponseExpected(i, PRODUCE))
    assert len(link.waiting) <= 4096
