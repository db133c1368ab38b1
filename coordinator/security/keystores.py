"""PKCS#12 keystores and truststores (Kafka's default store type since 3.x; JKS before it),
read with ``cryptography`` and handed to Python's ssl module as PEM.

Rules:
- A store is named by its setting (``ssl.keystore.location``, ``upstream.ssl.keystore.location``,
  ...); every error names that setting and, for a password problem, the password setting.
- PKCS#12 holds one password for the whole file in practice (keytool refuses different store
  and key passwords for PKCS12: "Different store and key passwords not supported"). kcoord
  opens it with the store password; when that fails and a distinct key password is given
  (Kafka's ``ssl.key.password``), with that one.
- ``ssl.SSLContext.load_cert_chain`` reads only a file. The key is written re-encrypted under
  a one-time random password into an anonymous in-memory file (Linux ``memfd_create``, read
  back through ``/proc/self/fd``), so the plaintext key never reaches a disk; where memfd is
  missing, into a 0600 ``mkstemp`` file removed right after the load (still holding only the
  re-encrypted key). Trust certificates go in memory (``load_verify_locations(cadata=)``).
- JKS: refused at start with the ``keytool -importkeystore`` command that converts it. No
  well-kept Python JKS reader exists (pyjks, the only one, has had no release since 2020).
- Stores are read when the SSLContext is built, so certificate reload (tls.ServerTls.poll) works
  for PKCS#12 as for PEM: a changed file is read again.
"""
from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .settings import SecurityConfigError

PEM, PKCS12, JKS = "PEM", "PKCS12", "JKS"
STORE_TYPES = (PEM, PKCS12)
_JKS_MAGIC = b"\xfe\xed\xfe\xed"      # a JKS file's first bytes (JCEKS: 0xCECECECE)
_JCEKS_MAGIC = b"\xce\xce\xce\xce"


class KeystoreError(SecurityConfigError):
    """A store kcoord cannot read; the message names the setting and the problem."""


def conversion_hint(location: str | None) -> str:
    source = location or "store.jks"
    target = source[:-4] + ".p12" if source.endswith(".jks") else source + ".p12"
    return (f"convert it with: keytool -importkeystore -srckeystore {source} -srcstoretype JKS "
            f"-destkeystore {target} -deststoretype PKCS12")


def store_type(value: str | None, setting: str, location: str | None) -> str:
    """``ssl.keystore.type``/``ssl.truststore.type`` -> PEM or PKCS12 (PEM when unset, as
    kcoord always read PEM). JKS and anything else are refused, naming ``setting``."""
    kind = (value or PEM).strip().upper()
    if kind == PKCS12:
        return PKCS12
    if kind == PEM:
        return PEM
    if kind in (JKS, "JCEKS"):
        raise KeystoreError(f"--config {setting}={value}: kcoord does not read {kind} stores (no maintained "
                            f"Python reader exists); {conversion_hint(location)}, then set {setting}=PKCS12")
    raise KeystoreError(f"--config {setting}={value!r}: one of PEM, PKCS12")


def _open(location: Path, passwords: tuple[tuple[str, str | None], ...], setting: str) -> object:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        data = location.read_bytes()
    except OSError as e:
        raise KeystoreError(f"{setting} {location}: cannot read the file: {e.strerror or e}") from None
    if data[:4] in (_JKS_MAGIC, _JCEKS_MAGIC):
        raise KeystoreError(f"{setting} {location}: the file is a JKS keystore, not PKCS12; "
                            f"{conversion_hint(str(location))}")
    tried = []
    for name, password in passwords:
        try:
            return pkcs12.load_pkcs12(data, password.encode("utf-8") if password is not None else None)
        except UnsupportedAlgorithm as e:
            raise KeystoreError(f"{setting} {location}: the store uses an algorithm this OpenSSL does not "
                                f"support ({e}); re-export it with AES-256 (openssl pkcs12 -export, keytool "
                                "since Java 12 do by default)") from None
        except ValueError as e:
            if "deserialize" in str(e):
                raise KeystoreError(f"{setting} {location}: not a readable PKCS#12 file (corrupt, truncated, or "
                                    "another format: a PEM file needs the type PEM)") from None
            tried.append(name)
    given = [name for name, password in passwords if password is not None]
    if not given:
        raise KeystoreError(f"{setting} {location}: the store is password-protected; set "
                            f"{passwords[0][0]} (or {passwords[0][0]}.file / .env)")
    raise KeystoreError(f"{setting} {location}: wrong password: the value of "
                        f"{' or '.join(dict.fromkeys(tried))} does not open the store")


@dataclass(frozen=True, slots=True)
class KeyMaterial:
    """A private key and its chain as PEM: the key encrypted under ``password``."""

    chain_pem: bytes
    key_pem: bytes
    password: bytes


def read_keystore(location: str | Path, password: str | None, *, setting: str, password_setting: str,
                  key_password: str | None = None, key_password_setting: str = "") -> KeyMaterial:
    """The key and certificate chain (leaf first) of a PKCS#12 keystore."""
    from cryptography.hazmat.primitives import serialization

    passwords: tuple[tuple[str, str | None], ...] = ((password_setting, password),)
    if key_password is not None and key_password != password:
        passwords += ((key_password_setting, key_password),)
    store = _open(Path(location), passwords, setting)
    key, cert = getattr(store, "key", None), getattr(store, "cert", None)
    if key is None or cert is None:
        raise KeystoreError(f"{setting} {location}: the store holds no private key with its certificate "
                            "(a truststore given as a keystore?)")
    one_time = secrets.token_urlsafe(24).encode()
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.BestAvailableEncryption(one_time))
    chain = [cert.certificate, *(c.certificate for c in getattr(store, "additional_certs", []))]
    return KeyMaterial(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain), key_pem, one_time)


def read_truststore(location: str | Path, password: str | None, *, setting: str, password_setting: str) -> str:
    """The trusted certificates of a PKCS#12 truststore, as one PEM string (``cadata``).
    Java's truststores hold certificate entries only; a keystore's certificates count too."""
    from cryptography.hazmat.primitives import serialization

    store = _open(Path(location), ((password_setting, password),), setting)
    certs = [c.certificate for c in getattr(store, "additional_certs", [])]
    cert = getattr(store, "cert", None)
    if cert is not None:
        certs.insert(0, cert.certificate)
    if not certs:
        raise KeystoreError(f"{setting} {location}: the store holds no certificate")
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in certs)


def load_key_material(context: ssl.SSLContext, material: KeyMaterial) -> None:
    """``context.load_cert_chain`` from ``material`` without the plaintext key touching a disk."""
    blob = material.key_pem + material.chain_pem
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("kcoord-keystore", os.MFD_CLOEXEC)
        try:
            os.write(fd, blob)
            context.load_cert_chain(f"/proc/self/fd/{fd}", password=material.password)
        finally:
            os.close(fd)
        return
    fd, name = tempfile.mkstemp(prefix="kcoord-keystore-", suffix=".pem")   # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        context.load_cert_chain(name, password=material.password)
    finally:
        os.unlink(name)


__all__ = ["JKS", "PEM", "PKCS12", "STORE_TYPES", "KeyMaterial", "KeystoreError", "conversion_hint",
           "load_key_material", "read_keystore", "read_truststore", "store_type"]
