"""Client requests checked against the state topic and the safeguards before they are
forwarded: the guard stage of a client connection (the rules are in state_guard.py).

Produce is walked by hand (records skipped by their length, never decoded) because it is
the hottest forwarded path, and only up to max_decoded_request_bytes (state_guard.py says
what happens above); the admin APIs are decoded with the bounded codec. A request
that does not parse closes the connection like any bad frame; a refusal is answered in
request order like any response; a split request is forwarded without the state-topic
entries and its answer completed with them (forward.MergingPending). `GuardStage` is one
object per connection (connection.py owns it); it reaches the connection only through
`GuardedClient`.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from .. import metrics
from ..protocol.apis import api_name, response_class
from ..protocol.codec import BodyError, decode_body, encode_body
from ..protocol.framing import HeaderError, body_offset, response_frame
from . import feature_updates, group_configs
from .admin_limits import CAPPED_APIS, record_cap
from .admin_limits import RULE_RECORDS as RULE_ADMIN_RECORDS
from .admin_policy import Policy
from .badinput import BODY, HEADER
from .forward import MergingPending, NoResponseExpected, Pending
from .keyed_arrays import duplicate_key
from .produce_check import UNDECIDED, RecordChecks, Refused, record_checks
from .routes import Route
from .safeguards import Rules, Safeguards
from .state_guard import METRIC_API, SIZED_APIS, UPDATE_FEATURES, Allowed, Close, Local, Split
from .upstream_facts import cluster_facts

if TYPE_CHECKING:
    from .forward import UpstreamLink
    from .ports import ConnectionServices

class GuardedClient(Protocol):
    """What the guard stage uses of its connection."""

    @property
    def peer(self) -> tuple[str, int]: ...

    @property
    def listener(self) -> Any:
        """Its ListenerInfo (listeners.py)."""

    @property
    def link(self) -> UpstreamLink | None: ...

    def reject(self, what: str, route: Route | None = None, correlation_id: int | None = None,
               api_key: int | None = None, api_version: int | None = None, *, reason: str = ...) -> None: ...

    def forward(self, frame: bytes, pending: Pending | None) -> None: ...

    def answer(self, data: bytes) -> None: ...

    def stop(self) -> None:
        """Read nothing more; answer what came before, then close."""

    def client_principal(self) -> str | None: ...


class GuardStage:
    __slots__ = ("_client", "_gateway", "_guard", "_max_decoded_frame")

    def __init__(self, client: GuardedClient, gateway: ConnectionServices, max_decoded_frame: int) -> None:
        self._client = client
        self._gateway = gateway
        self._guard = gateway.guard
        self._max_decoded_frame = max_decoded_frame

    def produce(self, frame: bytes, route: Route, correlation_id: int) -> None:
        """Produce: walked by hand (records skipped by length) for the state-topic check."""
        client = self._client
        try:
            offset = body_offset(frame, route.request_header_version, self._max_decoded_frame)
            acks, decision = self._guard.produce(frame, route.api_version, offset, self._record_checks())
        except HeaderError as e:
            client.reject(str(e), route, correlation_id, reason=HEADER)
            return
        except Refused as e:   # it parses as far as read: its names or its size are what kcoord refuses
            client.reject(str(e), route, correlation_id, reason=BODY)
            return
        except BodyError as e:
            client.reject(f"body does not parse: {e}", route, correlation_id, reason=BODY)
            return
        if decision is None:
            if acks == 0:   # Kafka sends no response: nothing is queued for the client
                client.forward(frame, None)
                link = client.link
                assert link is not None
                link.expect_nothing(NoResponseExpected(correlation_id, route))
            else:
                client.forward(frame, Pending(correlation_id, route, len(frame)))
            return
        self.apply(decision, frame, route, correlation_id)

    def _record_checks(self) -> RecordChecks | None:
        """The Produce record checks of this process (produce_check.py), decided once the
        upstream's API keys are known, and kept on the shared guard (None: off)."""
        guard = self._guard
        checks = guard.record_checks
        if checks is UNDECIDED:
            gateway = self._gateway
            keys = gateway.cluster.upstream_api_versions   # type: ignore[attr-defined]
            checks = record_checks(getattr(gateway, "config", None), keys)
            if keys:
                guard.record_checks = checks
        return checks   # type: ignore[return-value]

    def _policy(self) -> Policy:
        """The safeguards of this client (its listener, its principal). The shared guard's
        Safeguards are built at the gateway's start (gateway.py); a guard built without a
        gateway (unit tests) gets Kafka's limits."""
        guard = self._guard
        guards = guard.safeguards
        if guards is None:
            guards = guard.safeguards = Safeguards(Rules())
        client = self._client
        principal = client.client_principal() or "User:ANONYMOUS"
        return Policy(guards.rules(getattr(client.listener, "listener", ""), principal), guards, principal)

    def admin(self, frame: bytes, route: Route, correlation_id: int) -> None:
        """Admin APIs that can touch the state topic: decoded, checked, then forwarded."""
        try:
            offset = body_offset(frame, route.request_header_version)
            assert route.request_class is not None
            request = decode_body(route.request_class, frame, offset)
        except HeaderError as e:
            self._client.reject(str(e), route, correlation_id, reason=HEADER)
            return
        except BodyError as e:
            self._client.reject(f"body does not parse: {e}", route, correlation_id, reason=BODY)
            return
        twice = duplicate_key(route.api_key, request)     # Kafka's parse costs N**2 (keyed_arrays.py)
        if twice is not None:
            self._client.reject(f"{api_name(route.api_key)} v{route.api_version}: {twice}", route, correlation_id,
                                reason=BODY)
            return
        if route.api_key in group_configs.GROUP_CONFIG_APIS and group_configs.takes(route.api_key, route.api_version,
                                                                                     request):
            self._group_configs(frame, route, correlation_id, request, offset)
            return
        decision: Local | Split | Allowed | None
        if route.api_key == UPDATE_FEATURES:
            decision = feature_updates.decide(route.api_version, request, frame, offset)
        elif route.api_key in SIZED_APIS:
            decision = self._guard.admin(route.api_key, route.api_version, request, frame, offset,
                                         cluster_facts(self._gateway), self._policy())
        else:
            decision = self._guard.admin(route.api_key, route.api_version, request, frame, offset)
        if decision is None:
            self._client.forward(frame, Pending(correlation_id, route, len(frame)))
            return
        self.apply(decision, frame, route, correlation_id)

    def _group_configs(self, frame: bytes, route: Route, correlation_id: int, request: Any, offset: int) -> None:
        """GROUP resources are kcoord's (group_configs.py): served here, the rest through the
        guard's rules below; Kafka's cap on the whole request's records comes first."""
        if route.api_key in CAPPED_APIS:
            capped = record_cap(route.api_key, response_class(route.api_key, route.api_version), request)
            if capped is not None:
                self.apply(Local(capped[0], capped[1], RULE_ADMIN_RECORDS), frame, route, correlation_id)
                return

        def rest_decision(rest: Any, rest_frame: bytes) -> tuple:
            at = body_offset(rest_frame, route.request_header_version)
            decision = (self._guard.admin(route.api_key, route.api_version, rest, rest_frame, at,
                                          cluster_facts(self._gateway), self._policy())
                        if route.api_key in SIZED_APIS else
                        self._guard.admin(route.api_key, route.api_version, rest, rest_frame, at))
            if decision.__class__ is Local:
                return ("local", decision.response)   # type: ignore[union-attr]
            if decision.__class__ is Split:
                return ("forward", decision.frame, decision.merge)   # type: ignore[union-attr]
            return ("forward", rest_frame, None)
        group_configs.serve(self._client, self._gateway.service, frame, route, correlation_id, request, offset,
                            rest_decision)

    def apply(self, decision: Local | Split | Close | Allowed, frame: bytes, route: Route,
                     correlation_id: int) -> None:
        api = METRIC_API.get(route.api_key, "other")
        client = self._client
        peer = client.peer
        where = (peer[0], peer[1], client.listener.name, api_name(route.api_key),
                 route.api_version, correlation_id)
        state_log = self._gateway.state_log
        if decision.__class__ is Allowed:
            metrics.GATEWAY_STATE_TOPIC_REQUESTS.labels(api=api, outcome="allowed").inc()
            state_log.log(logging.WARNING, "%s, from %s:%d on %s [%s v%d, correlation_id=%d]",
                          decision.note, *where)   # type: ignore[union-attr]
            client.forward(frame, Pending(correlation_id, route, len(frame)))
            return
        if decision.__class__ is Close:
            metrics.GATEWAY_STATE_TOPIC_REQUESTS.labels(api=api, outcome="refused").inc()
            state_log.log(logging.WARNING, "closing connection from %s:%d on %s: %s [%s v%d, correlation_id=%d]",
                          *where[:3], decision.reason, *where[3:])   # type: ignore[union-attr]
            # Answer what came before, then close (flush closes once the queue is empty).
            client.stop()
            return
        split = decision.__class__ is Split
        rule = decision.rule   # type: ignore[union-attr]
        if rule:
            metrics.GATEWAY_SAFEGUARD_REFUSALS.labels(api=api, rule=rule).inc()
            self._gateway.limit_log.log(logging.WARNING, "refused by kcoord's %s rule%s: %s, from %s:%d on %s "
                                        "[%s v%d, correlation_id=%d]", rule, " (the rest forwarded)" if split else "",
                                        decision.note, *where)   # type: ignore[union-attr]
        else:
            metrics.GATEWAY_STATE_TOPIC_REQUESTS.labels(api=api, outcome="split" if split else "refused").inc()
            state_log.log(logging.WARNING,
                          "refused for the state topic%s: %s, from %s:%d on %s [%s v%d, correlation_id=%d]",
                          " (the rest forwarded)" if split else "", decision.note, *where)   # type: ignore[union-attr]
        if split:
            client.forward(decision.frame, MergingPending(correlation_id, route, len(frame),  # type: ignore[union-attr]
                                                         decision.merge))   # type: ignore[union-attr]
        else:
            body = encode_body(decision.response)   # type: ignore[union-attr]
            client.answer(response_frame(correlation_id, body, route.response_header_version))

