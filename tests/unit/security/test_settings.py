import pytest

from coordinator.security.settings import (
    SecurityConfigError,
    is_security_setting,
    redacted,
    resolve,
    upstream_client_config,
)


def test_names_that_are_security_settings():
    assert is_security_setting("upstream.sasl.mechanism")
    assert is_security_setting("ssl.keystore.location")
    assert is_security_setting("authorizer")
    assert not is_security_setting("consumer.session.timeout.ms")


def test_secret_from_file_and_env(tmp_path, monkeypatch):
    (tmp_path / "pw").write_text("s3cret\n")
    monkeypatch.setenv("KC_TEST_PW", "from-env")
    got = resolve([("upstream.sasl.password.file", str(tmp_path / "pw")),
                   ("ssl.key.password.env", "KC_TEST_PW"), ("ssl.keystore.location", "/k.pem")])
    assert got == {"upstream.sasl.password": "s3cret", "ssl.key.password": "from-env",
                   "ssl.keystore.location": "/k.pem"}
    assert redacted(got)["upstream.sasl.password"] == "[hidden]"
    assert upstream_client_config(got) == {"sasl.password": "s3cret"}


def test_missing_secret_names_the_setting(tmp_path, monkeypatch):
    monkeypatch.delenv("KC_NOPE", raising=False)
    with pytest.raises(SecurityConfigError, match="upstream.sasl.password.env=KC_NOPE"):
        resolve({"upstream.sasl.password.env": "KC_NOPE"})
    with pytest.raises(SecurityConfigError, match="cannot read"):
        resolve({"upstream.sasl.password.file": str(tmp_path / "absent")})


def test_twice_is_an_error(tmp_path):
    (tmp_path / "pw").write_text("x")
    with pytest.raises(SecurityConfigError, match="given twice"):
        resolve([("upstream.sasl.password", "a"), ("upstream.sasl.password.file", str(tmp_path / "pw"))])
