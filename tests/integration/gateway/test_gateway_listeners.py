"""The listener map: bootstrap at P, brokers at P+1.. by node id, late brokers at the next free port."""
from __future__ import annotations

import socket

from coordinator.protocol import apis
from gateway_helpers import LoopThread, start_gateway
from support.raw_client import call, request
from support.tansu import TansuBroker

METADATA = request(apis.METADATA, 12, topics=(), allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)


def test_listener_map_and_a_broker_that_appears_later(gw_loop: LoopThread, gw_tansu: TansuBroker) -> None:
    running = start_gateway(gw_loop, gw_tansu.bootstrap)
    try:
        gateway = running.gateway
        listeners = gateway.listeners
        assert [(i.name, i.port, i.node_id) for i in listeners] == [
            ("bootstrap", running.port, None), ("broker-111", running.port + 1, 111)]
        assert listeners[1].upstream == (("127.0.0.1", gw_tansu.port),)
        assert "-> 127.0.0.1:%d" % gw_tansu.port in listeners[1].describe()

        # A node the gateway has not seen (as if upstream grew): it gets the next free port
        # at once, already accepting connections, forwarding to that node's address.
        blocker = socket.socket()     # the next port is taken (listened on): skip it. As a
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # listener, it binds a
        blocker.bind(("127.0.0.1", running.port + 2))                   # port in TIME_WAIT too
        blocker.listen()
        try:
            host, port = gw_loop.call(lambda: gateway.address_of(999, "127.0.0.1", gw_tansu.port))
        finally:
            blocker.close()
        assert (host, port) == ("127.0.0.1", running.port + 3)
        assert gw_loop.call(lambda: gateway.address_of(999, "127.0.0.1", gw_tansu.port)) == (host, port)
        response = call((host, port), apis.METADATA, 12, METADATA)
        assert {b.node_id: b.port for b in response.brokers} == {111: running.port + 1}
        assert [i.name for i in gateway.listeners] == ["bootstrap", "broker-111", "broker-999"]
    finally:
        running.close()
