"""The owner's side of an Envelope (API 58, KIP-590): a per-group config request another
kcoord instance received from a client and carries here, to the instance that owns the
groups' shards, with the client's principal and address (protocol/envelope.py reads it;
docs/user/cluster.md, "Requests for another instance's groups").

Rules of this module:
- Who may send one: as Kafka's `ControllerApis.handleEnvelopeRequest`, a principal with
  Cluster CLUSTER_ACTION (the kcoord instances' own); any other sender is answered
  CLUSTER_AUTHORIZATION_FAILED and nothing inside is read. The check is the row's hook that
  sees the sending client (`ApiSpec.topic_check`, run by the authorization stage); under
  ALLOW_ALL (no authorizer) every principal has every right, so there is nothing to check.
- What it carries is hostile like any client request: decoded bounded, and a bad principal,
  address or inner request answers the Envelope with Kafka's error (protocol/envelope.py).
- The inner request is authorized as the carried principal (Group DESCRIBE_CONFIGS /
  ALTER_CONFIGS, service/group_configs.py), audited under it, and served from this
  instance's own shards only: an enveloped request is never sent on to another instance, so
  two instances whose maps differ for a moment cannot bounce it between them.
- The Envelope is not advertised in ApiVersions (Kafka lists it on no client listener): it
  is answered, not listed.
"""
from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ..authz import CLUSTER, CLUSTER_NAME, Action
from ..gateway.ratelog import RateLimitedLog
from ..protocol import envelope as wire
from ..protocol.api_table import ApiSpec, Groups
from ..protocol.service import ClientInfo
from ..security.metrics import count_denied
from . import group_configs

CLUSTER_ACTION = "CLUSTER_ACTION"
_ACTION = Action(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
# A client may send Envelopes at will: refusals are logged at a bounded rate (gateway/ratelog.py).
_REFUSALS = RateLimitedLog(logging.getLogger("kcoord.service"), 1.0)


async def serve(service: Any, ctx: Any, request: Any, sender: ClientInfo | None = None) -> Any:
    """The EnvelopeResponse to ``request`` (the row's handler; ``sender``: the sending
    client, when the authorization stage checked it)."""
    try:
        inner = wire.unwrap(request)
    except wire.EnvelopeError as e:
        _REFUSALS.log(logging.WARNING, "Envelope from %s refused with %s: %s",
                      sender.principal if sender is not None else ctx.client_host, e.code.name.upper(), e)
        return wire.refused(e.code)
    header = inner.header
    client = ClientInfo(client_id=header.client_id, host=inner.host, port=0,
                        listener=sender.listener if sender is not None else "", principal=inner.principal)
    response = await group_configs.serve(service, header.api_key, header.api_version, inner.request, client,
                                         forwarded=True)
    return wire.answer(inner, response)


async def check_sender(topic_checks: Any, handler: Any, ctx: Any, request: Any, client: ClientInfo) -> Any:
    """Cluster CLUSTER_ACTION for the sending client (Kafka's check of an Envelope's sender),
    then the handler, which learns who sent it."""
    await topic_checks.prepare(client, [_ACTION])
    if not topic_checks.authorizer.authorize(client, [_ACTION])[0]:
        count_denied("Envelope", CLUSTER, 1)
        _REFUSALS.log(logging.WARNING, "Envelope from %s at %s:%d refused: CLUSTER_AUTHORIZATION_FAILED (principal "
                      "%s lacks Cluster CLUSTER_ACTION)", client.principal, client.host, client.port, client.principal)
        return wire.refused(ErrorCode.cluster_authorization_failed)
    return await handler(ctx, request, sender=client)


ENVELOPE_ROWS: tuple[ApiSpec, ...] = (
    ApiSpec(wire.ENVELOPE, "Envelope", (0, 0), wire.error_response, serve, advertised=False,
            groups=Groups.NONE, topic_check=check_sender),
)
