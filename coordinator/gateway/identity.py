"""Who a client connection's requests come from (connection.py's part).

Rules:
- the principal is SASL's once the connection authenticated (sasl.py), else the TLS
  listener's client-certificate principal (listeners.py), else ClientInfo's default,
  ANONYMOUS;
- a connection on a listener that authenticates clients with SASL gets a SaslSession and a
  SaslGate; on any other listener both are None, so the per-request cost there is one
  attribute test;
- the forward link authenticates as kcoord only when sasl.forward_link_sasl says so.
"""
from __future__ import annotations

import asyncio
from typing import Any

from ..protocol.service import ClientInfo
from .sasl import SaslGate, SaslSession, client_principal, forward_link_opener, forward_link_sasl


class ClientIdentity:
    __slots__ = ("_client", "_gateway", "_listener", "sasl_session", "sasl")

    def __init__(self, client: Any, gateway: Any, listener: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._client = client          # the connection: its peer, listener name, transport, principal
        self._gateway = gateway
        self._listener = listener
        settings = getattr(gateway, "sasl", None)
        self.sasl_session = SaslSession(settings) if settings is not None and settings.applies_to(listener) else None
        self.sasl = SaslGate(client, gateway, self.sasl_session, loop) if self.sasl_session is not None else None

    def principal(self) -> str | None:
        return client_principal(self.sasl_session, self._listener, self._client.transport)

    def request_info(self, client_id: str | None) -> ClientInfo:
        """Who sends this request: SASL's principal first, else the listener's mTLS one
        (listeners.py), else ClientInfo's default ANONYMOUS (sasl.py client_principal)."""
        client = self._client
        peer = client.peer
        principal = client.client_principal()      # the connection's (a test may stand in for it)
        return (ClientInfo(client_id, peer[0], peer[1], client.listener_name) if principal is None
                else ClientInfo(client_id, peer[0], peer[1], client.listener_name, principal))

    @property
    def sasl_principal(self) -> str | None:
        """The principal the connection authenticated as (None: not authenticated, or unknown)."""
        return self.sasl.principal if self.sasl is not None else None

    @property
    def forward_link_opener(self) -> Any:
        """How forward.UpstreamLink opens its link: as kcoord, or plainly (None); sasl.py."""
        return forward_link_opener(forward_link_sasl(self._gateway, self._listener, self.sasl_session))
