"""The security settings of `kcoord serve`: which `--config NAME=VALUE` names they are, and
how secrets are read.

Names:
- server side (listeners, client TLS, SASL termination): Kafka's broker names, `ssl.*`,
  `sasl.*`, `listener.security.protocol.map`, `ssl.principal.mapping.rules`, ...;
- kcoord's own upstream connections (state topic, loading, metadata, admin, forward
  links): librdkafka's client names with an `upstream.` prefix
  (`upstream.sasl.mechanism=SCRAM-SHA-512`, `upstream.ssl.ca.location=...`);
- authorization: `authorizer=upstream|probe|file|none` and `authorizer.*`, `super.users`,
  `allow.everyone.if.no.acl.found`; auditing: `audit.*`.

Secrets: any name ending in `.file` or `.env` names where the value of the name without the
suffix is read from: `upstream.sasl.password.file=/run/secrets/kcoord` reads the file (one
trailing newline stripped), `upstream.sasl.password.env=KCOORD_PW` reads the environment.
A missing file or variable is a configuration error naming the setting. Values are never
logged: `redacted()` is what may be printed.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

# A `--config` name is a security setting when it is one of these or starts with a prefix.
PREFIXES = ("ssl.", "sasl.", "upstream.", "listener.", "listeners.", "authorizer.", "audit.", "principal.",
            "connections.max.reauth.ms")
NAMES = frozenset({"authorizer", "super.users", "allow.everyone.if.no.acl.found", "security.protocol",
                   "security.inter.broker.protocol", "connection.failed.authentication.delay.ms"})
# `.file` names kcoord re-reads itself each time (a token rotated on disk), not secrets read once.
KEPT_AS_PATHS = frozenset({"upstream.sasl.oauthbearer.token.file"})
_SECRET_WORDS = ("password", "secret", "token", "key.password", "jaas")


class SecurityConfigError(ValueError):
    """A security setting kcoord refuses; the message names the setting."""


def is_security_setting(name: str) -> bool:
    return name in NAMES or name.startswith(PREFIXES)


def _read_secret(name: str, kind: str, where: str) -> str:
    if kind == "file":
        try:
            text = Path(where).read_text()
        except OSError as e:
            raise SecurityConfigError(f"--config {name}.file={where}: cannot read the file: {e.strerror}") from None
        return text[:-1] if text.endswith("\n") else text
    value = os.environ.get(where)
    if value is None:
        raise SecurityConfigError(f"--config {name}.env={where}: the environment variable is not set")
    return value


def resolve(items: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """Settings with `.file`/`.env` indirections read. A name given both directly and
    through an indirection is an error (which one would win is not obvious)."""
    pairs = list(items.items()) if isinstance(items, Mapping) else list(items)
    out: dict[str, str] = {}
    for name, value in pairs:
        base, kind = name, None
        for suffix in (".file", ".env"):
            # ssl.keystore.location is a path kcoord reads itself; only secrets use `.file`.
            if name.endswith(suffix) and any(w in name for w in _SECRET_WORDS) and name not in KEPT_AS_PATHS:
                base, kind = name[: -len(suffix)], suffix[1:]
        if base in out:
            raise SecurityConfigError(f"--config {base} is given twice")
        out[base] = _read_secret(base, kind, value) if kind else value
    return out


def redacted(settings: Mapping[str, str]) -> dict[str, str]:
    """What may be logged: secret values replaced by `[hidden]`."""
    return {k: ("[hidden]" if any(w in k for w in _SECRET_WORDS) else v) for k, v in settings.items()}


def upstream_client_config(settings: Mapping[str, str]) -> dict[str, str]:
    """The `upstream.*` settings without the prefix: librdkafka's names, as confluent-kafka
    takes them (`security.protocol`, `sasl.mechanism`, `ssl.ca.location`, ...)."""
    return {k[len("upstream."):]: v for k, v in settings.items() if k.startswith("upstream.")}
