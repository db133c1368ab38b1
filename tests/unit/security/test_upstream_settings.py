"""UpstreamSecurity.from_settings: librdkafka's names under `upstream.`, what each protocol
produces for aiokafka, confluent-kafka and kcoord's own links, and errors naming the setting."""
from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from coordinator.security.sasl_client import OAuthBearer, Plain, Scram
from coordinator.security.settings import SecurityConfigError, resolve
from coordinator.security.upstream import KNOWN, UpstreamSecurity, jwt_expiry

CALLS: list[int] = []


def sync_provider() -> str:
    CALLS.append(1)
    return "aaa.bbb."


async def async_provider() -> str:
    return "ccc.ddd."


def not_a_token() -> int:
    return 42


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from support.kafka_tls import write_ca_and_server_pem

    return write_ca_and_server_pem(tmp_path_factory.mktemp("tls"))["ca"]


def up(**settings: str) -> UpstreamSecurity:
    return UpstreamSecurity.from_settings({f"upstream.{k.replace('_', '.')}": v for k, v in settings.items()})


def test_default_is_plaintext_and_changes_nothing() -> None:
    security = UpstreamSecurity.from_settings({"authorizer": "none"})
    assert security.protocol == "PLAINTEXT" and not security.tls and not security.sasl
    assert security.ssl_context() is None
    assert security.confluent_config() == {"security.protocol": "PLAINTEXT"}


def test_sasl_ssl_scram(ca: Path) -> None:
    security = UpstreamSecurity.from_settings({
        "upstream.security.protocol": "sasl_ssl", "upstream.sasl.mechanism": "SCRAM-SHA-512",
        "upstream.sasl.username": "kcoord", "upstream.sasl.password": "pw", "upstream.ssl.ca.location": str(ca)})
    context = security.ssl_context()
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert security.ssl_context() is context           # built once
    assert security.confluent_config() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "kcoord",
        "sasl.password": "pw", "ssl.ca.location": str(ca)}
    mechanism = asyncio.run(security.new_mechanism())
    assert isinstance(mechanism, Scram) and mechanism.name == "SCRAM-SHA-512"
    assert "pw" not in repr(security) and "pw" not in security.describe()
    assert security.describe() == f"SASL_SSL, SCRAM-SHA-512 as kcoord, CA {ca}"


def test_plain_over_sasl_plaintext_and_secret_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("from-file\n")
    settings = resolve([("upstream.security.protocol", "SASL_PLAINTEXT"), ("upstream.sasl.mechanisms", "PLAIN"),
                        ("upstream.sasl.username", "u"), ("upstream.sasl.password.file", str(tmp_path / "pw"))])
    security = UpstreamSecurity.from_settings(settings)
    assert security.ssl_context() is None
    mechanism = asyncio.run(security.new_mechanism())
    assert isinstance(mechanism, Plain) and mechanism.initial() == b"\0u\0from-file"


def test_ssl_without_ca_uses_the_system_store_and_hostname_verification_can_be_turned_off(ca: Path) -> None:
    assert up(security_protocol="SSL").ssl_context().check_hostname  # type: ignore[union-attr]
    lax = UpstreamSecurity.from_settings({"upstream.security.protocol": "SSL", "upstream.ssl.ca.location": str(ca),
                                          "upstream.ssl.endpoint.identification.algorithm": "none"})
    context = lax.ssl_context()
    assert context is not None and not context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert "hostname verification OFF" in lax.describe()


def test_the_protocol_from_the_upstream_url() -> None:
    assert UpstreamSecurity.from_settings({}, protocol="ssl").protocol == "SSL"
    with pytest.raises(SecurityConfigError, match="upstream.security.protocol: SSL disagrees with the upstream "
                                                  "URL's SASL_SSL://"):
        UpstreamSecurity.from_settings({"upstream.security.protocol": "SSL"}, protocol="SASL_SSL")


@pytest.mark.parametrize("settings, error", [
    ({"upstream.sasl.mechansim": "PLAIN"}, r"upstream.sasl.mechansim: unknown setting; the upstream settings "
                                           r"kcoord knows are upstream.security.protocol, upstream.sasl.mechanism"),
    ({"upstream.security.protocol": "TLS"}, "upstream.security.protocol: 'TLS' is not one of PLAINTEXT, SSL"),
    ({"upstream.security.protocol": "SASL_SSL"}, "upstream.sasl.mechanism: required with security.protocol=SASL_SSL"),
    ({"upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": "GSSAPI"},
     "upstream.sasl.mechanism: 'GSSAPI' is not one of PLAIN, SCRAM-SHA-256"),
    ({"upstream.security.protocol": "SASL_PLAINTEXT", "upstream.sasl.mechanism": "PLAIN",
      "upstream.sasl.username": "u"}, "upstream.sasl.password: required with sasl.mechanism=PLAIN"),
    ({"upstream.ssl.ca.location": "/ca.pem"}, "upstream.ssl.ca.location: set, but upstream.security.protocol="
                                              "PLAINTEXT does not use TLS"),
    ({"upstream.security.protocol": "SSL", "upstream.sasl.username": "u"},
     "upstream.sasl.username: set, but upstream.security.protocol=SSL does not use SASL"),
    ({"upstream.security.protocol": "SSL", "upstream.ssl.endpoint.identification.algorithm": "dns"},
     "'dns' is not https or none"),
    ({"upstream.security.protocol": "SSL", "upstream.ssl.ca.location": "/nonexistent/ca.pem"},
     "upstream.ssl.ca.location: cannot load CA certificates from /nonexistent/ca.pem"),
    ({"upstream.security.protocol": "SSL", "upstream.ssl.key.location": "/k.pem"},
     "upstream.ssl.key.location: set without upstream.ssl.certificate.location"),
    ({"upstream.security.protocol": "SSL", "upstream.ssl.certificate.location": "/nope.pem"},
     "upstream.ssl.certificate.location: cannot load the client certificate /nope.pem"),
    ({"upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": "OAUTHBEARER"},
     "upstream.sasl.oauthbearer.token.provider: required with sasl.mechanism=OAUTHBEARER"),
    ({"upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": "OAUTHBEARER",
      "upstream.sasl.oauthbearer.token.provider": "nomodule_here_x:f"},
     "upstream.sasl.oauthbearer.token.provider: cannot import nomodule_here_x"),
    ({"upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": "OAUTHBEARER",
      "upstream.sasl.oauthbearer.token.provider": "json"}, "'json' is not module:callable"),
    ({"upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": "OAUTHBEARER",
      "upstream.sasl.oauthbearer.token.provider": "json:nothing"}, "json has no nothing"),
    ({"upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": "SCRAM-SHA-256",
      "upstream.sasl.username": "u", "upstream.sasl.password": "p", "upstream.sasl.oauthbearer.token": "t"},
     "upstream.sasl.oauthbearer.token: only used with sasl.mechanism=OAUTHBEARER"),
    ({"upstream.sasl.mechanism": "PLAIN", "upstream.sasl.mechanisms": "PLAIN"}, "the same setting"),
])
def test_refused_settings_are_named(settings: dict[str, str], error: str) -> None:
    with pytest.raises(SecurityConfigError, match=error):
        UpstreamSecurity.from_settings(settings)


def test_unknown_setting_lists_every_known_name() -> None:
    with pytest.raises(SecurityConfigError) as refused:
        UpstreamSecurity.from_settings({"upstream.bootstrap.servers": "x:1"})
    assert all(f"upstream.{name}" in str(refused.value) for name in KNOWN)


def oauth(**extra: str) -> UpstreamSecurity:
    return UpstreamSecurity.from_settings({"upstream.security.protocol": "SASL_SSL",
                                           "upstream.sasl.mechanism": "OAUTHBEARER",
                                           **{f"upstream.{k}": v for k, v in extra.items()}})


def test_oauthbearer_provider_hook_sync_and_async() -> None:
    CALLS.clear()
    security = oauth(**{"sasl.oauthbearer.token.provider": f"{__name__}:sync_provider"})
    mechanism = asyncio.run(security.new_mechanism())
    assert isinstance(mechanism, OAuthBearer) and b"auth=Bearer aaa.bbb." in mechanism.initial()
    asyncio.run(security.new_mechanism())
    assert CALLS == [1, 1], "the provider is asked for every authentication"
    token, _expiry = security.confluent_config()["oauth_cb"]("")
    assert token == "aaa.bbb."
    assert "sasl.oauthbearer.token.provider" not in security.confluent_config()
    asynchronous = oauth(**{"sasl.oauthbearer.token.provider": f"{__name__}:async_provider"})
    assert asyncio.run(asynchronous.oauth_token()) == "ccc.ddd."


def test_oauthbearer_provider_returning_no_token_is_named() -> None:
    security = oauth(**{"sasl.oauthbearer.token.provider": f"{__name__}:not_a_token"})
    with pytest.raises(SecurityConfigError, match=f"{__name__}:not_a_token returned int, not a token string"):
        asyncio.run(security.oauth_token())


def test_oauthbearer_token_file_is_reread(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("first.token.\n")
    security = oauth(**{"sasl.oauthbearer.token.file": str(path)})
    assert asyncio.run(security.oauth_token()) == "first.token."
    path.write_text("second.token.\n")
    assert asyncio.run(security.oauth_token()) == "second.token."


def test_jwt_expiry_reads_exp_or_defaults() -> None:
    import base64
    import json
    import time

    payload = base64.urlsafe_b64encode(json.dumps({"exp": 2_000_000_000}).encode()).decode().rstrip("=")
    assert jwt_expiry(f"e30.{payload}.") == 2_000_000_000
    assert abs(jwt_expiry("opaque") - (time.time() + 3600)) < 5


def test_client_certificate_for_mutual_tls(tmp_path: Path) -> None:
    from support.kafka_tls import write_ca_and_server_pem

    files = write_ca_and_server_pem(tmp_path)     # the keystore holds the key and its certificate
    security = UpstreamSecurity.from_settings({"upstream.security.protocol": "SSL",
                                               "upstream.ssl.ca.location": str(files["ca"]),
                                               "upstream.ssl.certificate.location": str(files["keystore"])})
    assert security.ssl_context() is not None
    assert f"client certificate {files['keystore']}" in security.describe()
    with pytest.raises(SecurityConfigError, match="upstream.ssl.certificate.location: cannot load the client "
                                                  "certificate .* with key"):
        UpstreamSecurity.from_settings({"upstream.security.protocol": "SSL",
                                        "upstream.ssl.certificate.location": str(files["ca"]),
                                        "upstream.ssl.key.location": str(files["ca"])})
