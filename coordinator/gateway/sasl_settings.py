"""Client SASL settings (sasl.py's part): what `--config` says, per Kafka listener.

Rules:
- Kafka's broker names where Kafka has one (`sasl.enabled.mechanisms`,
  `connections.max.reauth.ms`, `connection.failed.authentication.delay.ms`,
  `sasl.server.max.receive.size`); kcoord's own: `sasl.termination`, `sasl.credentials.file`,
  `sasl.principal.template`;
- `listener.name.<listener>.<name>` overrides a name for one listener (`for_listener`);
- a bad value refuses to start: ValueError naming the setting (and the listener).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..security.sasl_inspect import DEFAULT_PRINCIPAL_TEMPLATE, DEFAULT_SUB_CLAIM, check_template
from ..security.sasl_server import SUPPORTED_MECHANISMS, CredentialStore
from ..security.tls import listener_settings

DEFAULT_MAX_RECEIVE = 524288          # Kafka's sasl.server.max.receive.size
DEFAULT_FAILED_DELAY_MS = 100         # Kafka's connection.failed.authentication.delay.ms
_TRUE = ("true", "yes", "1", "on")

# The names SaslSettings reads, which `listener.name.<listener>.NAME` may give for one listener.
LISTENER_NAMES = ("sasl.termination", "sasl.enabled.mechanisms", "sasl.credentials.file", "sasl.principal.template",
                  "sasl.oauthbearer.sub.claim.name", "connections.max.reauth.ms",
                  "connection.failed.authentication.delay.ms", "sasl.server.max.receive.size")


def listeners_with_overrides(settings: Mapping[str, str]) -> set[str]:
    """The (lower-case) listener names some `listener.name.<listener>.<LISTENER_NAMES>` names."""
    found = set()
    for key in settings:
        if key.lower().startswith("listener.name."):
            listener, _, name = key[len("listener.name."):].partition(".")
            if name in LISTENER_NAMES:
                found.add(listener.lower())
    return found

@dataclass(frozen=True, slots=True)
class SaslSettings:
    """Client SASL, from `--config` settings (Kafka's broker names where Kafka has one)."""

    termination: bool = False                     # sasl.termination
    mechanisms: tuple[str, ...] = SUPPORTED_MECHANISMS   # sasl.enabled.mechanisms (termination)
    credentials: CredentialStore | None = None    # sasl.credentials.file (termination)
    principal_template: str = DEFAULT_PRINCIPAL_TEMPLATE   # sasl.principal.template
    sub_claim: str = DEFAULT_SUB_CLAIM            # sasl.oauthbearer.sub.claim.name
    reauth_ms: int = 0                            # connections.max.reauth.ms (termination)
    failed_delay_ms: int = DEFAULT_FAILED_DELAY_MS    # connection.failed.authentication.delay.ms
    max_receive: int = DEFAULT_MAX_RECEIVE        # sasl.server.max.receive.size
    allow_unknown_principal: bool = False         # authorizer=none
    # True: every listener authenticates clients, whatever its security protocol (in-process
    # gateways, tests); False: the SASL_PLAINTEXT and SASL_SSL listeners only.
    default_on: bool = False
    # Kafka listener name (upper case) -> its settings, for listeners with their own
    # `listener.name.<listener>.*` SASL settings; the others use these.
    per_listener: Mapping[str, SaslSettings] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Mapping[str, str], *, default_on: bool = False) -> SaslSettings:
        """From the resolved security settings (coordinator/security/settings.py), with the
        per-listener overrides. Raises ValueError naming the setting (and listener) at fault."""
        base = cls._one(settings, default_on=default_on)
        per: dict[str, SaslSettings] = {}
        for listener in sorted(listeners_with_overrides(settings)):
            try:
                per[listener.upper()] = cls._one(listener_settings(settings, listener), default_on=default_on)
            except ValueError as e:
                raise ValueError(f"listener {listener.upper()} (listener.name.{listener}.*): {e}") from None
        return replace(base, per_listener=per) if per else base

    def for_listener(self, listener: str | None) -> SaslSettings:
        """The settings of the Kafka listener ``listener`` (ListenerInfo.listener)."""
        return self.per_listener.get(listener.upper(), self) if listener and self.per_listener else self

    @property
    def terminates_anywhere(self) -> bool:
        return self.termination or any(s.termination for s in self.per_listener.values())

    def passes_through(self, sasl_listeners: list[str] | None = None) -> bool:
        """Whether some SASL listener passes SASL through. ``sasl_listeners``: the names of
        the SASL_* listeners; None: every listener with overrides, and the base."""
        if sasl_listeners is None:
            return not self.termination or any(not s.termination for s in self.per_listener.values())
        return any(not self.for_listener(name).termination for name in sasl_listeners)

    @classmethod
    def _one(cls, settings: Mapping[str, str], *, default_on: bool) -> SaslSettings:
        def number(name: str, default: int) -> int:
            raw = settings.get(name)
            if raw is None:
                return default
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"--config {name}={raw!r} is not a number") from None
            if value < 0:
                raise ValueError(f"--config {name}={raw} must be >= 0")
            return value

        termination = settings.get("sasl.termination", "false").strip().lower() in _TRUE
        mechanisms = tuple(m.strip().upper() for m in settings.get("sasl.enabled.mechanisms", "").split(",")
                           if m.strip()) or SUPPORTED_MECHANISMS
        credentials = None
        if termination:
            unknown = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
            if unknown:
                raise ValueError(f"--config sasl.enabled.mechanisms: kcoord terminates only "
                                 f"{', '.join(SUPPORTED_MECHANISMS)}, not {', '.join(unknown)}")
            path = settings.get("sasl.credentials.file")
            if not path:
                raise ValueError("--config sasl.termination=true needs --config sasl.credentials.file=<path>")
            credentials = CredentialStore.load(path)
        template = check_template(settings.get("sasl.principal.template", DEFAULT_PRINCIPAL_TEMPLATE))
        max_receive = number("sasl.server.max.receive.size", DEFAULT_MAX_RECEIVE)
        return cls(termination=termination, mechanisms=mechanisms, credentials=credentials,
                   principal_template=template,
                   sub_claim=settings.get("sasl.oauthbearer.sub.claim.name", DEFAULT_SUB_CLAIM) or DEFAULT_SUB_CLAIM,
                   reauth_ms=number("connections.max.reauth.ms", 0),
                   failed_delay_ms=number("connection.failed.authentication.delay.ms", DEFAULT_FAILED_DELAY_MS),
                   max_receive=max_receive or DEFAULT_MAX_RECEIVE,
                   allow_unknown_principal=settings.get("authorizer", "").strip().lower() == "none",
                   default_on=default_on)

    def applies_to(self, listener: Any) -> bool:
        """Whether a connection on ``listener`` must authenticate: its `security_protocol`
        (SASL_PLAINTEXT, SASL_SSL) says, else `default_on`."""
        protocol = getattr(listener, "security_protocol", None)
        return self.default_on or (protocol is not None and str(protocol).upper().startswith("SASL_"))
