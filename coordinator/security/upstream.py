"""How kcoord connects to the upstream cluster itself: TLS and SASL for its one upstream client
(coordinator/upstream/client.py: the state topic, the gateway's metadata/admin links, the
membership, the ACL mirror's DescribeAcls) and the TLS of the per-client forward links.

Settings are librdkafka's client names with an ``upstream.`` prefix (docs/user/security-upstream.md):

    upstream.security.protocol              PLAINTEXT (default) | SSL | SASL_PLAINTEXT | SASL_SSL
    upstream.sasl.mechanism                 PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | OAUTHBEARER
                                            (librdkafka's ``sasl.mechanisms`` is accepted too)
    upstream.sasl.username, upstream.sasl.password     PLAIN and SCRAM
    upstream.sasl.oauthbearer.token.provider           OAUTHBEARER: ``module:callable``
    upstream.sasl.oauthbearer.token                    OAUTHBEARER: a fixed token
    upstream.sasl.oauthbearer.token.file               OAUTHBEARER: a file re-read at each
                                                       authentication (see the note below)
    upstream.ssl.ca.location                PEM file (or directory) of the CAs to trust;
                                            the system's store when absent
    upstream.ssl.certificate.location, upstream.ssl.key.location, upstream.ssl.key.password
                                            a client certificate (mutual TLS), PEM
    upstream.ssl.keystore.location, upstream.ssl.keystore.password
                                            a client certificate (mutual TLS) from a PKCS#12
                                            file (librdkafka's names; keystores.py reads it)
    upstream.ssl.endpoint.identification.algorithm     https (default: the broker's
                                            certificate must name the host kcoord dials) | none

Secrets (``upstream.sasl.password``, ``upstream.ssl.key.password``,
``upstream.ssl.keystore.password``, the token) may come from a
file or the environment through ``.file``/``.env`` (settings.resolve). Note: resolve() reads
``upstream.sasl.oauthbearer.token.file`` once and hands ``upstream.sasl.oauthbearer.token``
on; only a ``.token.file`` that reaches from_settings unresolved is re-read per authentication.

The token provider: ``upstream.sasl.oauthbearer.token.provider=mypkg.tokens:fetch`` imports
``fetch`` from ``mypkg.tokens``. It is called with no arguments before each authentication
and returns the compact JWS token as a ``str``, or an awaitable of one (an ``async def``).
It runs on kcoord's event loop: a provider that blocks must hand its work to a thread. It
should cache the token and refresh it before it expires (it is called for every connection
kcoord authenticates). An exception from it fails that authentication, naming the provider.
"""
from __future__ import annotations

import asyncio
import base64
import importlib
import inspect
import json
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .sasl_client import MECHANISMS, Mechanism, OAuthBearer, Plain, Scram
from .settings import SecurityConfigError, upstream_client_config

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
KNOWN = (
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
    "sasl.oauthbearer.token.provider", "sasl.oauthbearer.token", "sasl.oauthbearer.token.file",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "ssl.endpoint.identification.algorithm", "ssl.keystore.location", "ssl.keystore.password",
)
_TLS_NAMES = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
              "ssl.endpoint.identification.algorithm", "ssl.keystore.location", "ssl.keystore.password")
_SASL_NAMES = ("sasl.username", "sasl.password", "sasl.oauthbearer.token.provider",
               "sasl.oauthbearer.token", "sasl.oauthbearer.token.file")

TokenProvider = Callable[[], Awaitable[str]]


def _err(name: str, message: str) -> SecurityConfigError:
    return SecurityConfigError(f"--config upstream.{name}: {message}")


@dataclass(frozen=True)
class UpstreamSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = field(default=None, repr=False)
    verify_hostname: bool = True
    keystore_location: str | None = None
    keystore_password: str | None = field(default=None, repr=False)
    token_provider: TokenProvider | None = field(default=None, repr=False)
    provider_name: str | None = None
    # The upstream.* settings as given (librdkafka names), for confluent_config().
    settings: Mapping[str, str] = field(default_factory=dict, repr=False)
    _ssl: list[ssl.SSLContext] = field(default_factory=list, repr=False, compare=False)

    # --- construction ---------------------------------------------------------------

    @classmethod
    def from_settings(cls, settings: Mapping[str, str], *, protocol: str | None = None) -> UpstreamSecurity:
        """From the resolved ``--config`` settings (settings.resolve), reading the ``upstream.*``
        names. ``protocol``: the one an ``--upstream SASL_SSL://host:port`` URL names, if any;
        it must agree with ``upstream.security.protocol`` when both are given. Raises
        SecurityConfigError naming the setting; files (CA, certificate, key) are read here."""
        conf = upstream_client_config(settings)
        unknown = sorted(set(conf) - set(KNOWN))
        if unknown:
            raise _err(unknown[0], "unknown setting; the upstream settings kcoord knows are "
                                   + ", ".join(f"upstream.{k}" for k in KNOWN))
        if "sasl.mechanism" in conf and "sasl.mechanisms" in conf:
            raise _err("sasl.mechanisms", "given together with upstream.sasl.mechanism (the same setting)")
        given = conf.get("security.protocol")
        if given is not None:
            given = given.strip().upper()
            if given not in PROTOCOLS:
                raise _err("security.protocol", f"{conf['security.protocol']!r} is not one of {', '.join(PROTOCOLS)}")
        if protocol is not None:
            protocol = protocol.strip().upper()
            if protocol not in PROTOCOLS:
                raise SecurityConfigError(f"--upstream {protocol}://...: not one of {', '.join(PROTOCOLS)}")
            if given is not None and given != protocol:
                raise _err("security.protocol", f"{given} disagrees with the upstream URL's {protocol}://")
        chosen = given or protocol or "PLAINTEXT"
        tls = chosen in ("SSL", "SASL_SSL")
        sasl = chosen.startswith("SASL_")
        if not tls:
            for name in _TLS_NAMES:
                if name in conf:
                    raise _err(name, f"set, but upstream.security.protocol={chosen} does not use TLS "
                                     f"(SSL or SASL_SSL does)")
        mechanism_name = "sasl.mechanism" if "sasl.mechanism" in conf else "sasl.mechanisms"
        mechanism = conf.get(mechanism_name)
        if not sasl:
            for name in (mechanism_name, *_SASL_NAMES):
                if name in conf:
                    raise _err(name, f"set, but upstream.security.protocol={chosen} does not use SASL "
                                     f"(SASL_PLAINTEXT or SASL_SSL does)")
        verify = conf.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
        if verify not in ("https", "none"):
            raise _err("ssl.endpoint.identification.algorithm", f"{verify!r} is not https or none")
        provider = provider_name = None
        if sasl:
            if mechanism is None:
                raise _err("sasl.mechanism",
                           f"required with security.protocol={chosen}: one of {', '.join(MECHANISMS)}")
            mechanism = mechanism.strip().upper()
            if mechanism not in MECHANISMS:
                raise _err(mechanism_name, f"{conf[mechanism_name]!r} is not one of {', '.join(MECHANISMS)}")
            if mechanism == "OAUTHBEARER":
                provider, provider_name = _oauth_provider(conf)
                for name in ("sasl.username", "sasl.password"):
                    if name in conf:
                        raise _err(name, "not used by OAUTHBEARER (give a token provider or token)")
            else:
                for name in ("sasl.username", "sasl.password"):
                    if not conf.get(name):
                        raise _err(name, f"required with sasl.mechanism={mechanism}")
                for name in ("sasl.oauthbearer.token.provider", "sasl.oauthbearer.token",
                             "sasl.oauthbearer.token.file"):
                    if name in conf:
                        raise _err(name, f"only used with sasl.mechanism=OAUTHBEARER, not {mechanism}")
        if "ssl.key.location" in conf and "ssl.certificate.location" not in conf:
            raise _err("ssl.key.location", "set without upstream.ssl.certificate.location")
        if "ssl.keystore.location" in conf and "ssl.certificate.location" in conf:
            raise _err("ssl.keystore.location", "given with upstream.ssl.certificate.location: one client "
                                                "certificate, from a PKCS#12 keystore or from PEM files")
        if "ssl.keystore.password" in conf and "ssl.keystore.location" not in conf:
            raise _err("ssl.keystore.password", "set without upstream.ssl.keystore.location")
        security = cls(
            protocol=chosen, mechanism=mechanism if sasl else None,
            username=conf.get("sasl.username"), password=conf.get("sasl.password"),
            ca_location=conf.get("ssl.ca.location"), certificate_location=conf.get("ssl.certificate.location"),
            key_location=conf.get("ssl.key.location"), key_password=conf.get("ssl.key.password"),
            verify_hostname=verify == "https", keystore_location=conf.get("ssl.keystore.location"),
            keystore_password=conf.get("ssl.keystore.password"), token_provider=provider, provider_name=provider_name,
            settings=dict(conf))
        if tls:
            security.ssl_context()      # read the files now: a bad path fails the start, naming it
        return security

    # --- what it is -----------------------------------------------------------------

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def describe(self) -> str:
        """For the log: the protocol, mechanism, user and trust, never a secret."""
        parts = [self.protocol]
        if self.sasl:
            who = self.username if self.mechanism != "OAUTHBEARER" else (self.provider_name or "token")
            parts.append(f"{self.mechanism} as {who}")
        if self.tls:
            parts.append(f"CA {self.ca_location or 'system store'}")
            if self.certificate_location or self.keystore_location:
                parts.append(f"client certificate {self.certificate_location or self.keystore_location}")
            if not self.verify_hostname:
                parts.append("hostname verification OFF")
        return ", ".join(parts)

    # --- TLS ------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client-side context (None without TLS), built once: trust from
        ssl.ca.location (or the system store), hostname verification unless
        ssl.endpoint.identification.algorithm=none, a client certificate if given."""
        if not self.tls:
            return None
        if self._ssl:
            return self._ssl[0]
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if self.ca_location:
            path = Path(self.ca_location)
            try:
                if path.is_dir():
                    context.load_verify_locations(capath=str(path))
                else:
                    context.load_verify_locations(cafile=str(path))
            except (OSError, ssl.SSLError) as e:
                raise _err("ssl.ca.location", f"cannot load CA certificates from {path}: {e}") from None
        if self.certificate_location:
            try:
                context.load_cert_chain(self.certificate_location, self.key_location, self.key_password)
            except (OSError, ssl.SSLError) as e:
                raise _err("ssl.certificate.location",
                           f"cannot load the client certificate {self.certificate_location}"
                           + (f" with key {self.key_location}" if self.key_location else "") + f": {e}") from None
        if self.keystore_location:
            from .keystores import load_key_material, read_keystore

            where = "--config upstream.ssl.keystore.location"
            material = read_keystore(self.keystore_location, self.keystore_password, setting=where,
                                     password_setting="upstream.ssl.keystore.password")
            try:
                load_key_material(context, material)
            except (OSError, ssl.SSLError, ValueError) as e:
                raise _err("ssl.keystore.location", f"the PKCS12 key and chain of {self.keystore_location} "
                                                    f"do not load: {e}") from None
        context.check_hostname = self.verify_hostname
        context.verify_mode = ssl.CERT_REQUIRED
        self._ssl.append(context)
        return context

    def server_hostname(self, host: str) -> str | None:
        """``server_hostname=`` for ``loop.create_connection`` to ``host`` (SNI, and the name
        the certificate must carry); None without TLS."""
        return host if self.tls else None

    # --- SASL -----------------------------------------------------------------------

    async def new_mechanism(self) -> Mechanism:
        """A fresh client mechanism for one authentication (SASL protocols only)."""
        if self.mechanism == "PLAIN":
            return Plain(self.username or "", self.password or "")
        if self.mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            return Scram(self.mechanism, self.username or "", self.password or "")
        if self.mechanism == "OAUTHBEARER":
            return OAuthBearer(await self.oauth_token())
        raise ValueError(f"no SASL mechanism for security.protocol={self.protocol}")

    async def oauth_token(self) -> str:
        assert self.token_provider is not None
        try:
            token = await self.token_provider()
        except Exception as e:
            raise SecurityConfigError(f"the OAUTHBEARER token provider {self.provider_name} failed: {e!r}") from e
        if not isinstance(token, str) or not token.strip():
            raise SecurityConfigError(f"the OAUTHBEARER token provider {self.provider_name} returned "
                                      f"{type(token).__name__}, not a token string")
        return token.strip()

    # --- what the client libraries take ---------------------------------------------

    def confluent_config(self) -> dict[str, Any]:
        """Settings for confluent-kafka (librdkafka): the upstream.* names without the prefix;
        an OAUTHBEARER provider becomes ``oauth_cb`` (called on librdkafka's thread)."""
        conf: dict[str, Any] = {k: v for k, v in self.settings.items() if not k.startswith("sasl.oauthbearer.")}
        conf["security.protocol"] = self.protocol
        if self.mechanism == "OAUTHBEARER":
            conf["oauth_cb"] = _confluent_oauth_cb(self)
        return conf


# --- OAUTHBEARER providers ----------------------------------------------------------


def _oauth_provider(conf: Mapping[str, str]) -> tuple[TokenProvider, str]:
    sources = [n for n in ("sasl.oauthbearer.token.provider", "sasl.oauthbearer.token",
                           "sasl.oauthbearer.token.file") if n in conf]
    if not sources:
        raise _err("sasl.oauthbearer.token.provider", "required with sasl.mechanism=OAUTHBEARER "
                   "(or upstream.sasl.oauthbearer.token / .token.file)")
    if len(sources) > 1:
        raise _err(sources[1], f"given together with upstream.{sources[0]}: choose one token source")
    name = sources[0]
    value = conf[name]
    if name == "sasl.oauthbearer.token":
        token = value.strip()
        if not token:
            raise _err(name, "empty")

        async def fixed() -> str:
            return token
        return fixed, "a fixed token"
    if name == "sasl.oauthbearer.token.file":
        path = Path(value)
        if not path.is_file():
            raise _err(name, f"{path} is not a readable file")

        async def from_file() -> str:
            return path.read_text().strip()
        return from_file, f"the token file {path}"
    target = _import(name, value)

    async def call() -> str:
        result = target()
        if inspect.isawaitable(result):
            result = await result
        return result  # type: ignore[no-any-return]
    return call, value


def _import(name: str, spec: str) -> Callable[[], Any]:
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise _err(name, f"{spec!r} is not module:callable")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise _err(name, f"cannot import {module_name}: {e}") from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise _err(name, f"{module_name} has no {attribute}") from None
    if not callable(target):
        raise _err(name, f"{spec} is not callable")
    return target  # type: ignore[no-any-return]


def jwt_expiry(token: str, default_lifetime: float = 3600.0) -> float:
    """The ``exp`` claim of a JWS token (seconds since the epoch), or now + default."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, ValueError, KeyError, TypeError):
        return time.time() + default_lifetime


def _confluent_oauth_cb(security: UpstreamSecurity) -> Callable[[str], tuple[str, float]]:
    def oauth_cb(_config: str) -> tuple[str, float]:
        token = asyncio.run(security.oauth_token())    # librdkafka's own thread: no loop runs there
        return token, jwt_expiry(token)
    return oauth_cb
