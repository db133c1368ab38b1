"""Server-side TLS of the gateway's listeners, in Kafka's broker names.

Settings (`--config NAME=VALUE`; each may be given for one listener only as
`listener.name.<listener>.NAME`, which wins over the plain NAME for that listener, key by
key, as in Kafka):

- `ssl.keystore.type=PEM|PKCS12` (default PEM). PEM (KIP-651): `ssl.keystore.location` is
  one PEM file with the private key and the certificate chain (leaf first);
  `ssl.key.password`: the password of an encrypted (PKCS#8) key. PKCS12 (keystores.py):
  `ssl.keystore.location` is a PKCS#12 file opened with `ssl.keystore.password` (or
  `ssl.key.password` when that differs and the first fails). JKS is refused with the
  keytool command that converts it.
- `ssl.truststore.type=PEM|PKCS12`; `ssl.truststore.location`: the CA bundle (PEM) or the
  PKCS#12 truststore (`ssl.truststore.password`) client certificates are checked against
  (the system's CAs when not given).
- `ssl.client.auth=none|requested|required` (default none).
- `ssl.enabled.protocols` (default `TLSv1.2,TLSv1.3`), `ssl.cipher.suites` (OpenSSL
  cipher names for TLS 1.2; TLS 1.3 suites are OpenSSL's defaults).
- `ssl.principal.mapping.rules` (principal_mapping.py; default `DEFAULT`).
- kcoord's own: `ssl.reload.interval.ms` (default 30000, at least 100): how often the
  keystore and truststore files are checked for a change (modification time, size, inode);
  a changed file is read into a new SSLContext that new connections get, connections
  already open keep theirs; a file that does not load keeps the old context and logs an
  ERROR naming the file and the problem (once per change).
  `ssl.handshake.timeout.ms` (default 10000): a TLS handshake not done by then is closed.

This module knows configuration and certificates; the gateway does the I/O.
"""
from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .keystores import PEM, PKCS12, KeyMaterial, load_key_material, read_keystore, read_truststore, store_type
from .principal_mapping import DEFAULT_RULES, DerError, NoMatchingRule, PrincipalMapper, PrincipalMappingError
from .settings import SecurityConfigError

log = logging.getLogger("kcoord.security.tls")

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
TLS_PROTOCOLS = frozenset({SSL, SASL_SSL})
SASL_PROTOCOLS = frozenset({SASL_PLAINTEXT, SASL_SSL})

DEFAULT_RELOAD_INTERVAL_MS = 30_000
MIN_RELOAD_INTERVAL_MS = 100
DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000
CLIENT_AUTH = ("none", "requested", "required")
_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}

# The listener-side ssl.* names kcoord reads (or accepts and ignores: the client-side
# endpoint identification, which a broker's listener does not use either).
SERVER_SSL_NAMES = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites",
    "ssl.principal.mapping.rules", "ssl.reload.interval.ms", "ssl.handshake.timeout.ms", "ssl.protocol",
    "ssl.endpoint.identification.algorithm", "ssl.keystore.password", "ssl.truststore.password",
})
_UNSUPPORTED = {
    "ssl.keystore.key": "inline PEM is not read: put the key and chain in the file ssl.keystore.location names",
    "ssl.keystore.certificate.chain": "inline PEM is not read: use ssl.keystore.location",
    "ssl.truststore.certificates": "inline PEM is not read: use ssl.truststore.location",
}


class TlsConfigError(SecurityConfigError):
    """A TLS setting or file kcoord refuses; the message names the setting or the file."""


def listener_prefix(listener: str) -> str:
    return f"listener.name.{listener.lower()}."


def listener_settings(settings: Mapping[str, str], listener: str) -> dict[str, str]:
    """The settings one listener sees: `listener.name.<listener>.X` over `X`, key by key
    (the listener name is matched case-insensitively, as Kafka lower-cases it)."""
    prefix = listener_prefix(listener)
    out = {k: v for k, v in settings.items() if not k.startswith("listener.name.")}
    for key, value in settings.items():
        if key.lower().startswith(prefix):
            out[key[len(prefix):]] = value
    return out


def check_server_ssl_names(settings: Mapping[str, str], listeners: list[str]) -> None:
    """Refuses misspelt or unsupported listener-side `ssl.*` names (plain or per listener),
    and `listener.name.<x>.ssl.*` naming no listener."""
    known = {name.lower() for name in listeners}
    for key in settings:
        name = key
        if key.startswith("listener.name."):
            rest = key[len("listener.name."):]
            listener, _, name = rest.partition(".")
            if not name.startswith("ssl."):
                continue          # sasl.* and the rest are read elsewhere
            if listener.lower() not in known:
                raise TlsConfigError(f"--config {key}: no listener is named {listener!r} "
                                     f"(listeners: {', '.join(listeners)})")
        if not name.startswith("ssl."):
            continue
        if name in _UNSUPPORTED:
            raise TlsConfigError(f"--config {key}: {_UNSUPPORTED[name]}")
        if name not in SERVER_SSL_NAMES:
            raise TlsConfigError(f"--config {key}: unknown listener TLS setting; known: "
                                 f"{', '.join(sorted(SERVER_SSL_NAMES))}")


def _ms(settings: Mapping[str, str], name: str, default: int, minimum: int) -> float:
    text = settings.get(name)
    if text is None:
        return default / 1000
    try:
        value = int(text)
    except ValueError:
        raise TlsConfigError(f"--config {name}={text!r}: not a whole number of milliseconds") from None
    if value < minimum:
        raise TlsConfigError(f"--config {name}={value}: at least {minimum}")
    return value / 1000


@dataclass(frozen=True, slots=True)
class ServerTlsConfig:
    listener: str
    keystore: Path
    key_password: str | None = None
    truststore: Path | None = None
    keystore_type: str = PEM
    keystore_password: str | None = None
    truststore_type: str = PEM
    truststore_password: str | None = None
    client_auth: str = "none"
    protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    ciphers: str | None = None
    reload_interval: float = DEFAULT_RELOAD_INTERVAL_MS / 1000
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT_MS / 1000

    @classmethod
    def from_settings(cls, listener: str, settings: Mapping[str, str]) -> ServerTlsConfig:
        """From one listener's settings (listener_settings)."""
        def where(name: str) -> str:
            own = listener_prefix(listener) + name
            return f"{name} (or {own})"

        try:
            keystore_type = store_type(settings.get("ssl.keystore.type"), where("ssl.keystore.type"),
                                       settings.get("ssl.keystore.location"))
            truststore_type = store_type(settings.get("ssl.truststore.type"), where("ssl.truststore.type"),
                                         settings.get("ssl.truststore.location"))
        except SecurityConfigError as e:
            raise TlsConfigError(f"listener {listener}: {e}") from None
        for kind, name in ((keystore_type, "ssl.keystore.password"), (truststore_type, "ssl.truststore.password")):
            if kind == PEM and name in settings:
                raise TlsConfigError(f"listener {listener}: --config {where(name)}: a PEM store has no password "
                                     "(an encrypted PEM key's is ssl.key.password); PKCS12 stores have one")
        keystore = settings.get("ssl.keystore.location")
        if not keystore:
            raise TlsConfigError(f"listener {listener} is TLS: set --config {where('ssl.keystore.location')} "
                                 "to a PEM file with the private key and the certificate chain (or a PKCS12 "
                                 "store with ssl.keystore.type=PKCS12)")
        client_auth = settings.get("ssl.client.auth", "none").lower()
        if client_auth not in CLIENT_AUTH:
            raise TlsConfigError(f"listener {listener}: --config ssl.client.auth={client_auth!r}: "
                                 f"one of {', '.join(CLIENT_AUTH)}")
        protocols = tuple(p.strip() for p in settings.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3").split(",")
                          if p.strip())
        bad = [p for p in protocols if p not in _TLS_VERSIONS]
        if bad or not protocols:
            raise TlsConfigError(f"listener {listener}: --config ssl.enabled.protocols: {', '.join(bad) or 'empty'}"
                                 f" not supported (kcoord speaks {', '.join(_TLS_VERSIONS)})")
        protocol = settings.get("ssl.protocol")
        if protocol is not None and protocol not in ("TLS", *_TLS_VERSIONS):
            raise TlsConfigError(f"listener {listener}: --config ssl.protocol={protocol!r}: TLS, TLSv1.2 or TLSv1.3")
        ciphers = settings.get("ssl.cipher.suites") or None
        truststore = settings.get("ssl.truststore.location")
        return cls(listener=listener, keystore=Path(keystore), key_password=settings.get("ssl.key.password"),
                   truststore=Path(truststore) if truststore else None, client_auth=client_auth,
                   keystore_type=keystore_type, keystore_password=settings.get("ssl.keystore.password"),
                   truststore_type=truststore_type, truststore_password=settings.get("ssl.truststore.password"),
                   protocols=protocols, ciphers=ciphers,
                   reload_interval=_ms(settings, "ssl.reload.interval.ms", DEFAULT_RELOAD_INTERVAL_MS,
                                       MIN_RELOAD_INTERVAL_MS),
                   handshake_timeout=_ms(settings, "ssl.handshake.timeout.ms", DEFAULT_HANDSHAKE_TIMEOUT_MS, 1))

    def files(self) -> tuple[Path, ...]:
        return (self.keystore,) if self.truststore is None else (self.keystore, self.truststore)


def _problem(e: BaseException) -> str:
    if isinstance(e, ssl.SSLError):
        reason, library = getattr(e, "reason", None), getattr(e, "library", None)
        return f"{reason or e}" + (f" ({library})" if library else "")
    if isinstance(e, OSError):
        return e.strerror or str(e)
    return str(e)


def build_context(config: ServerTlsConfig) -> ssl.SSLContext:
    """A server SSLContext from the files as they are now; TlsConfigError names the file."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_TLS_VERSIONS[p] for p in config.protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    if config.ciphers:
        try:
            ctx.set_ciphers(config.ciphers.replace(",", ":").replace(" ", ""))
        except ssl.SSLError as e:
            raise TlsConfigError(f"listener {config.listener}: --config ssl.cipher.suites={config.ciphers!r}: "
                                 f"{_problem(e)} (OpenSSL cipher names)") from None
    if config.keystore_type == PKCS12:
        _load_pkcs12_keystore(ctx, config)
    else:
        _load_pem_keystore(ctx, config)
    if config.client_auth != "none":
        ctx.verify_mode = ssl.CERT_REQUIRED if config.client_auth == "required" else ssl.CERT_OPTIONAL
        if config.truststore is None:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    if config.truststore is not None:
        _load_truststore(ctx, config)
    return ctx


def _load_pkcs12_keystore(ctx: ssl.SSLContext, config: ServerTlsConfig) -> None:
    where = f"listener {config.listener}: ssl.keystore.location"
    material: KeyMaterial | None = None
    try:
        material = read_keystore(config.keystore, config.keystore_password, setting=where,
                                 password_setting="ssl.keystore.password", key_password=config.key_password,
                                 key_password_setting="ssl.key.password")
        load_key_material(ctx, material)
    except SecurityConfigError as e:
        raise TlsConfigError(str(e)) from None
    except (OSError, ssl.SSLError, ValueError) as e:
        raise TlsConfigError(f"{where} {config.keystore}: the PKCS12 key and chain do not load: {_problem(e)}") \
            from None


def _load_pem_keystore(ctx: ssl.SSLContext, config: ServerTlsConfig) -> None:
    try:
        ctx.load_cert_chain(config.keystore, password=config.key_password)
    except (OSError, ssl.SSLError, ValueError) as e:
        hint = ""
        if isinstance(e, ssl.SSLError):
            hint = " (the file needs the private key and the certificate chain, PEM; an encrypted key needs " \
                   "the right ssl.key.password)"
        raise TlsConfigError(f"listener {config.listener}: ssl.keystore.location {config.keystore}: "
                             f"cannot load the key and certificate chain: {_problem(e)}{hint}") from None


def _load_truststore(ctx: ssl.SSLContext, config: ServerTlsConfig) -> None:
    assert config.truststore is not None
    where = f"listener {config.listener}: ssl.truststore.location"
    try:
        if config.truststore_type == PKCS12:
            ctx.load_verify_locations(cadata=read_truststore(config.truststore, config.truststore_password,
                                                             setting=where, password_setting="ssl.truststore.password"))
        else:
            ctx.load_verify_locations(cafile=config.truststore)
    except SecurityConfigError as e:
        raise TlsConfigError(str(e)) from None
    except (OSError, ssl.SSLError, ValueError) as e:
        raise TlsConfigError(f"{where} {config.truststore}: cannot load the CA certificates: {_problem(e)}") from None


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class ServerTls:
    """One listener's TLS: the SSLContext new connections get, rebuilt when its files change.

    ``poll()`` (called every ``config.reload_interval`` by the gateway) compares the files'
    (mtime, size, inode) with those the current context was built from. A change is read
    into a new context; if that fails the old one stays and one ERROR names the file and
    the problem, until the files change again."""

    def __init__(self, config: ServerTlsConfig) -> None:
        self.config = config
        stamps = self._stamps()
        self.context = build_context(config)   # TlsConfigError at start: kcoord refuses to start
        self._built_from = stamps
        self._failed_at: tuple[Any, ...] | None = None
        self.reloads = 0
        self.reload_failures = 0

    def _stamps(self) -> tuple[Any, ...]:
        return tuple(_stamp(p) for p in self.config.files())

    def poll(self) -> bool:
        """True when a new context was loaded."""
        stamps = self._stamps()
        if stamps == self._built_from or stamps == self._failed_at:
            return False
        try:
            context = build_context(self.config)
        except TlsConfigError as e:
            self._failed_at = stamps
            self.reload_failures += 1
            log.error("TLS reload failed, listener %s keeps its previous certificates: %s", self.config.listener, e)
            return False
        self.context = context
        self._built_from = stamps
        self._failed_at = None
        self.reloads += 1
        log.info("listener %s: TLS certificates reloaded from %s", self.config.listener,
                 ", ".join(str(p) for p in self.config.files()))
        return True


@dataclass(slots=True)
class ListenerSecurity:
    """What a listener knows of security: its protocol, its TLS, and how an mTLS peer's
    certificate becomes a principal."""

    listener: str
    protocol: str
    tls: ServerTls | None = None
    mapper: PrincipalMapper | None = None

    @classmethod
    def from_settings(cls, listener: str, protocol: str, settings: Mapping[str, str]) -> ListenerSecurity:
        if protocol not in PROTOCOLS:
            raise TlsConfigError(f"listener {listener}: security protocol {protocol!r} is not one of "
                                 f"{', '.join(PROTOCOLS)}")
        own = listener_settings(settings, listener)
        if protocol not in TLS_PROTOCOLS:
            return cls(listener, protocol)
        config = ServerTlsConfig.from_settings(listener, own)
        try:
            mapper = PrincipalMapper(own.get("ssl.principal.mapping.rules", DEFAULT_RULES))
        except PrincipalMappingError as e:
            raise TlsConfigError(f"listener {listener}: {e}") from None
        return cls(listener, protocol, ServerTls(config), mapper)

    @property
    def client_auth(self) -> str:
        return self.tls.config.client_auth if self.tls is not None else "none"

    @property
    def mtls_principal(self) -> bool:
        """The principal comes from the client certificate: an SSL listener (on SASL_SSL
        it comes from SASL, as in Kafka)."""
        return self.protocol == SSL and self.client_auth != "none"

    def principal_of(self, transport: Any) -> str | None:
        """`User:<mapped subject>` of the client certificate on an SSL listener; None
        without one (the connection stays User:ANONYMOUS, as Kafka's). Raises
        NoMatchingRule when no mapping rule applies (the gateway refuses such a client at
        the handshake, as Kafka fails its authentication)."""
        if not self.mtls_principal or self.mapper is None:
            return None
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        if ssl_object is None:
            return None
        der = ssl_object.getpeercert(binary_form=True)
        if not der:
            return None
        try:
            return self.mapper.principal_of_certificate(der)
        except DerError as e:
            raise NoMatchingRule(f"client certificate subject does not parse: {e}") from None


__all__ = ["ListenerSecurity", "NoMatchingRule", "ServerTls", "ServerTlsConfig", "TlsConfigError",
           "build_context", "check_server_ssl_names", "listener_settings", "PROTOCOLS", "TLS_PROTOCOLS",
           "SASL_PROTOCOLS"]
