"""The gateway shell's parts on their own, with small fakes: the cluster view's upstream
link (metadata_link.py), the gateway's ports (listener_table.py), accepting TLS on them
(acceptor.py) and its connection registry (connection_registry.py), a connection's
flow-control limits (flow.py), its ending (ending.py) and identity (identity.py), and how a
SASL exchange ends (sasl_session.py)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from coordinator.config import CoordinatorConfig
from coordinator.gateway import metadata_link
from coordinator.gateway.connection_registry import ConnectionRegistry
from coordinator.gateway.ending import ConnectionEnd
from coordinator.gateway.flow import INFLIGHT, QUEUE, WRITE, FlowControl
from coordinator.gateway.identity import ClientIdentity
from coordinator.gateway.limits import Limits
from coordinator.gateway.listener_table import ListenerSet, ListenerTable
from coordinator.gateway.listeners import ListenerSpec
from coordinator.gateway.metadata_link import MetadataLink
from coordinator.gateway.ratelog import RateLimitedLog
from coordinator.gateway.responses import ResponseQueue
from coordinator.gateway.sasl_session import AUTHENTICATED, FAILED, ExchangeOutcome, SaslSession
from coordinator.gateway.sasl_settings import SaslSettings
from coordinator.protocol.apis import METADATA, kio_version_range
from coordinator.security.tls import ListenerSecurity

from support.ports import free_block, pool

from .test_connection_flow import FakeTransport
from .test_connection_parts import FakeReader as FlowReader

LOG = RateLimitedLog(__import__("logging").getLogger("kcoord.test"), 1000.0)


# --- metadata_link.py ---------------------------------------------------------------------

class FakeUpstream:
    """An UpstreamClient stand-in: answers or raises, remembers being closed."""
    made: list[FakeUpstream] = []

    def __init__(self, addresses) -> None:
        self.addresses = list(addresses)
        self.lost: Exception | None = None
        self.closed = False
        self.reauthentication_due = False
        self.fail: Exception | None = None
        FakeUpstream.made.append(self)

    @classmethod
    async def connect(cls, addresses, client_id, security=None):
        return cls(addresses)

    async def request(self, request, timeout):
        if self.fail is not None:
            raise self.fail
        return "answer"

    def close(self) -> None:
        self.closed = True


def test_the_link_asks_the_highest_version_both_speak_and_reconnects_after_a_drop(monkeypatch):
    monkeypatch.setattr(metadata_link, "UpstreamClient", FakeUpstream)
    FakeUpstream.made.clear()
    broken = []
    link = MetadataLink([("b", 1)], request_timeout=1.0, client_id="t", security=None,
                        known=lambda: [("n1", 2), ("b", 1)], on_broken=lambda: broken.append(1))
    low, high = kio_version_range(METADATA)
    link.upstream_api_versions = {METADATA: (low, high)}
    assert link.version_for(METADATA, preferred=12) == min(high, 12)
    with pytest.raises(metadata_link.UpstreamError, match="no usable version of API 19"):
        link.version_for(19, preferred=7)

    async def main():
        assert await link.call("r") == "answer"
        first = FakeUpstream.made[0]
        assert first.addresses == [("b", 1), ("n1", 2)], "bootstrap first, then the brokers listed, once each"
        first.fail = metadata_link.UpstreamError("boom")
        with pytest.raises(metadata_link.UpstreamError):
            await link.call("r")
        assert first.closed, "a failed request closes the link"
        first.lost = ConnectionResetError("reset")
        assert await link.call("r") == "answer"
        assert broken == [1] and len(FakeUpstream.made) == 2, "a dropped link is reported and replaced"
    asyncio.run(main())


# --- listener_table.py / connection_registry.py -------------------------------------------

def _table(port: int) -> ListenerTable:
    spec = ListenerSpec("PLAINTEXT", "PLAINTEXT", "127.0.0.1", port)
    lset = ListenerSet(spec, "gw.example", ListenerSecurity.from_settings("PLAINTEXT", "PLAINTEXT", {}), "", 0)

    async def serve(name, sock):
        sock.close()
    return ListenerTable([lset], serve)


def test_a_broker_gets_the_next_port_and_keeps_it_when_it_moves():
    base = free_block(pool(), 2)

    async def main():
        table = _table(base)
        lset = table.sets[0]
        table.listen(lset.info(None, base, (("up", 9092),)))
        info = table.broker_listener(1, "b1", 9092)
        assert (info.name, info.host, info.port) == ("broker-1", "gw.example", base + 1)
        moved = table.broker_listener(1, "b1-new", 9093)
        assert moved.port == base + 1 and moved.upstream == (("b1-new", 9093),)
        assert table.node_addresses() == {1: ("gw.example", base + 1)}
        assert [i.name for i in table.listeners] == ["bootstrap", "broker-1"]
        await asyncio.gather(*table.serving)
    asyncio.run(main())


class FakeConn:
    def __init__(self, ip: str, listener: str = "bootstrap") -> None:
        self.peer = (ip, 1)
        self.listener_name = listener
        self.paused: list[bool] = []
        self.aborted = False

    def queue_paused(self, paused: bool) -> None:
        self.paused.append(paused)

    def abort(self) -> None:
        self.aborted = True


def test_the_registry_admits_within_the_limits_and_pauses_and_resumes_the_queue():
    limits = Limits(CoordinatorConfig(max_connections_per_ip=1))
    registry = ConnectionRegistry(limits, _table(0), LOG)
    a, b = FakeConn("10.0.0.1"), FakeConn("10.0.0.1")
    assert registry.admit(a) and not registry.admit(b), "max.connections.per.ip=1"
    registry.connections.add(a)
    registry.pause_queue()
    assert limits.queue_paused and a.paused == [True]
    registry.check_queue()
    assert not limits.queue_paused and a.paused == [True, False]
    registry.release(a)
    assert not registry.connections and registry.admit(b), "a released slot admits again"
    registry.connections.add(b)
    registry.abort_all()
    assert b.aborted


# --- flow.py / ending.py --------------------------------------------------------------------

class FakeReader(FlowReader):
    """test_connection_parts' reader, with what ending reads too."""

    def __init__(self) -> None:
        super().__init__()
        self.admitted = True
        self.held = 0
        self.link: Any = None


class FakeLink:
    def __init__(self) -> None:
        self.reading: list[tuple[str, int]] = []
        self.closed = False

    def pause_reading(self, why: int) -> None:
        self.reading.append(("pause", why))

    def resume_reading(self, why: int) -> None:
        self.reading.append(("resume", why))

    def close(self) -> None:
        self.closed = True


def test_flow_counts_partial_frames_in_the_queue_and_closes_past_the_buffered_limit():
    async def main():
        limits = Limits(CoordinatorConfig(max_buffered_response_bytes_per_connection=1000))
        reader = FakeReader()
        flow = FlowControl(reader, limits, asyncio.get_running_loop(), LOG)
        reader.unread += b"\x00" * 30
        flow.count_unread()
        assert (flow.buf_counted, limits.queued_bytes, reader.q_bytes) == (30, 30, 30)
        flow.release_unread()
        assert (flow.buf_counted, limits.queued_bytes) == (0, 0)
        assert not flow.over_buffered(1000)
        assert flow.over_buffered(1001) and reader.aborted
    asyncio.run(main())


def test_flow_resumes_after_answers_and_pauses_the_link_with_the_writes():
    async def main():
        reader = FakeReader()
        reader.link = link = FakeLink()
        flow = FlowControl(reader, Limits(CoordinatorConfig()), asyncio.get_running_loop(), LOG)
        flow.pause(INFLIGHT)
        flow.pause(QUEUE)
        reader.q_requests = 1
        flow.answers_written(inflight_room=True)
        assert flow.paused == QUEUE, "still holding its share of the queue"
        reader.q_requests = 0
        flow.answers_written(inflight_room=False)
        assert flow.paused == 0 and reader.transport.reading
        flow.writing_paused()
        assert reader.write_paused and flow.paused == WRITE and link.reading == [("pause", 1)]
        flow.writing_resumed()
        assert not reader.write_paused and flow.paused == 0 and link.reading[-1] == ("resume", 1)
    asyncio.run(main())


def test_a_lost_connection_gives_back_its_share_its_slot_and_its_link():
    async def main():
        limits = Limits(CoordinatorConfig())
        reader = FakeReader()
        reader.link = link = FakeLink()
        flow = FlowControl(reader, limits, asyncio.get_running_loop(), LOG)
        released, checked = [], []
        gateway = SimpleNamespace(keep_until_done=lambda task: None, release=released.append,
                                  check_queue=lambda: checked.append(1))
        end = ConnectionEnd(reader, gateway, limits, ResponseQueue(), flow)  # type: ignore[arg-type]
        reader.unread += b"abc"
        flow.count_unread()
        reader.q_requests, reader.held = 2, 50
        limits.queue_paused = True
        end.lost()
        assert reader.closing and link.closed and released == [reader] and checked == [1]
        assert (limits.queued_bytes, reader.q_requests, reader.held, reader.admitted) == (0, 0, 0, False)
        end.lost()
        assert released == [reader], "released once"
    asyncio.run(main())


def test_close_aborts_a_client_that_does_not_read_and_stop_reads_nothing_more():
    async def main():
        limits = Limits(CoordinatorConfig())
        reader = FakeReader()
        end = ConnectionEnd(reader, SimpleNamespace(), limits, ResponseQueue(),  # type: ignore[arg-type]
                            FlowControl(reader, limits, asyncio.get_running_loop(), LOG))
        reader.unread += b"xyz"
        end.stop()
        assert reader.closing and not reader.unread and not reader.transport.reading
        end.close()
        assert reader.transport.closed and not reader.transport.aborted
        reader.transport, reader.write_paused = FakeTransport(), True
        end.close()
        assert reader.transport.aborted, "a graceful close would wait for a client that does not read"
    asyncio.run(main())


# --- identity.py / sasl_session.py ----------------------------------------------------------

class FakeClient:
    def __init__(self) -> None:
        self.peer = ("10.0.0.5", 4242)
        self.listener_name = "bootstrap"
        self.listener = SimpleNamespace(name="bootstrap", listener="PLAINTEXT")
        self.transport = None
        self.changed = 0

    def client_principal(self) -> str | None:
        return "User:cert"

    def principal_changed(self) -> None:
        self.changed += 1


def test_identity_on_a_listener_without_sasl_names_the_connections_principal():
    async def main():
        client = FakeClient()
        identity = ClientIdentity(client, SimpleNamespace(), client.listener, asyncio.get_running_loop())
        assert identity.sasl is None and identity.sasl_session is None and identity.sasl_principal is None
        info = identity.request_info("cid")
        assert (info.client_id, info.host, info.port, info.listener, info.principal) == \
            ("cid", "10.0.0.5", 4242, "bootstrap", "User:cert")
    asyncio.run(main())


def test_an_exchange_that_succeeds_records_the_principal_and_its_lifetime():
    client = FakeClient()
    outcome = ExchangeOutcome(client, LOG)  # type: ignore[arg-type]
    session = SaslSession(SaslSettings())
    session.mechanism = "PLAIN"
    outcome.succeeded(session, "alice", 60_000)
    assert (session.state, session.principal, session.lifetime_ms, client.changed) == \
        (AUTHENTICATED, "User:alice", 60_000, 1)
    assert session.deadline > 0
    outcome.succeeded(session, "alice", 0)
    assert client.changed == 1 and session.deadline == 0.0, "same principal: nothing to rebuild"
    outcome.failed(session, "bad password")
    assert session.state == FAILED and session.server is None and session.inspector is None


# --- acceptor.py ----------------------------------------------------------------------------

def test_a_certificate_no_rule_maps_is_refused_and_counted_as_a_failed_handshake():
    from coordinator.gateway.acceptor import Acceptor, _TlsAccepted
    from coordinator.security.principal_mapping import NoMatchingRule

    table = _table(0)
    counter = table.sets[0].handshake_failures
    before = counter._value.get()
    acceptor = Acceptor(table, lambda listener: None, LOG)

    def refuse(transport):
        raise NoMatchingRule("CN=nobody matches no rule")
    info = SimpleNamespace(name="bootstrap", listener="PLAINTEXT", principal_of=refuse)
    transport = FakeTransport()
    accepted = _TlsAccepted(acceptor, None, info, ("10.0.0.7", 1234))  # type: ignore[arg-type]
    accepted.connection_made(transport)
    assert transport.aborted and accepted.connection is None
    assert counter._value.get() == before + 1
    accepted.data_received(b"ignored")          # no connection: nothing to hand over
