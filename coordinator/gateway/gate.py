"""The forward gate on a client connection: may this forwarded request go upstream?

Rules (the gate itself is coordinator/authz.py): a gate with `check_forward` (RequestGate:
security/forward_acl.py) sees the ClientInfo and the frame and may answer the request
itself (the API's own authorization error, in request order); Metadata it allows is
forwarded with a filter that hides the topics the client may not DESCRIBE, as Kafka does.
A gate without it decides by address, listener and API. Any refusal without an answer
closes the connection at once. Requests kcoord serves itself never pass the gate. It
reaches the connection only through `GatedClient`.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..metrics import GATEWAY_FORWARD_DENIED
from ..protocol.apis import METADATA, api_name
from ..protocol.framing import response_frame
from ..protocol.service import ClientInfo
from .routes import Route

if TYPE_CHECKING:
    from .ports import ConnectionServices


class GatedClient(Protocol):
    """What the forward gate uses of its connection."""

    @property
    def gateway(self) -> ConnectionServices: ...

    @property
    def info(self) -> ClientInfo | None:
        """The ClientInfo of the connection's latest group request, if any."""

    @property
    def peer(self) -> tuple[str, int]: ...

    @property
    def listener_name(self) -> str: ...

    def request_info(self, client_id: str | None) -> ClientInfo: ...

    def answer(self, data: bytes) -> None: ...

    def forward_checked(self, frame: bytes, route: Route, correlation_id: int,
                        merge: Callable[[bytes], bytes] | None = None) -> None: ...

    def abort(self) -> None: ...


def gate_allows(client: GatedClient, gate: Any, route: Route, correlation_id: int, frame: bytes) -> bool:
    """True: forward the request as usual. False: handled here (answered, forwarded with a
    response filter, or the connection closed)."""
    check = getattr(gate, "check_forward", None)
    if check is not None:
        info = client.info
        if info is None:
            info = client.request_info(None)
        verdict = check(info, route.api_key, route.api_version, frame, route.request_header_version)
        if verdict is True:
            if route.api_key == METADATA:
                # Kafka hides the topics a client may not DESCRIBE: the answer is filtered
                # (after the address rewrite) on its way back (forward_acl.py).
                response_filter = getattr(gate, "metadata_response_filter", None)
                merge = response_filter(info, route.api_version, frame, route.request_header_version) \
                    if response_filter is not None else None
                if merge is not None:
                    client.forward_checked(frame, route, correlation_id, merge)
                    return False      # forwarded here
            return True
        if verdict is not False:     # the API's own authorization error, answered here
            GATEWAY_FORWARD_DENIED.labels(api=api_name(route.api_key)).inc()
            client.answer(response_frame(correlation_id, bytes(verdict), route.response_header_version))
            return False
    elif gate.allow_forward(client.peer[0], client.listener_name, route.api_key, route.api_version):
        return True
    api = api_name(route.api_key)
    GATEWAY_FORWARD_DENIED.labels(api=api).inc()
    peer = client.peer
    client.gateway.bad_log.log(logging.WARNING, "closing connection from %s:%d on %s: the forward gate refused "
                               "%s(%d) v%d [correlation_id=%d]", peer[0], peer[1], client.listener_name,
                               api, route.api_key, route.api_version, correlation_id)
    client.abort()
    return False
