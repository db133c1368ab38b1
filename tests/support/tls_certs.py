"""Certificates for the TLS listener tests (issue 13), made with ``cryptography`` (a test
dependency): a CA, server certificates whose SANs cover the advertised host (localhost and
127.0.0.1), client certificates with any subject, as the PEM files Kafka reads
(``ssl.keystore.type=PEM``: PKCS#8 key, then the chain; an encrypted key with a password)."""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass
class Issued:
    key_pem: bytes
    cert_pem: bytes
    serial: int
    der: bytes


class TestCA:
    """A throwaway CA that issues server and client certificates."""

    __test__ = False

    def __init__(self, name: str = "kcoord test CA") -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = _now()
        self.cert = (x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(hours=1))
                     .not_valid_after(now + datetime.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))

    @property
    def pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write_ca(self, path: Path) -> Path:
        path.write_bytes(self.pem)
        return path

    def issue(self, subject: Any, *, server: bool, sans: tuple[str, ...] = ("localhost", "127.0.0.1"),
              password: bytes | None = None) -> Issued:
        """``subject``: a common name, or a cryptography x509.Name."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = subject if isinstance(subject, x509.Name) else x509.Name(
            [x509.NameAttribute(NameOID.COMMON_NAME, subject)])
        serial = x509.random_serial_number()
        now = _now()
        builder = (x509.CertificateBuilder().subject_name(name).issuer_name(self.name)
                   .public_key(key.public_key()).serial_number(serial)
                   .not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=2)))
        if server:
            general: list[x509.GeneralName] = []
            for san in sans:
                try:
                    general.append(x509.IPAddress(ipaddress.ip_address(san)))
                except ValueError:
                    general.append(x509.DNSName(san))
            builder = builder.add_extension(x509.SubjectAlternativeName(general), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage(
            [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        encryption: Any = (serialization.BestAvailableEncryption(password) if password
                           else serialization.NoEncryption())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        return Issued(key_pem, cert.public_bytes(serialization.Encoding.PEM), serial,
                      cert.public_bytes(serialization.Encoding.DER))

    def keystore(self, path: Path, subject: Any = "localhost", *, server: bool = True,
                 sans: tuple[str, ...] = ("localhost", "127.0.0.1"), password: bytes | None = None) -> Issued:
        """A PEM keystore as Kafka reads it: the key, the certificate, the CA."""
        issued = self.issue(subject, server=server, sans=sans, password=password)
        path.write_bytes(issued.key_pem + issued.cert_pem + self.pem)
        return issued

    def client_files(self, directory: Path, subject: Any, stem: str = "client") -> tuple[Path, Path, Issued]:
        """(key file, certificate file, issued) for a client (librdkafka's ssl.key.location
        and ssl.certificate.location)."""
        issued = self.issue(subject, server=False)
        key_path = directory / f"{stem}-key.pem"
        cert_path = directory / f"{stem}-cert.pem"
        key_path.write_bytes(issued.key_pem)
        cert_path.write_bytes(issued.cert_pem)
        return key_path, cert_path, issued

    def pkcs12_keystore(self, path: Path, subject: Any = "localhost", *, server: bool = True,
                        sans: tuple[str, ...] = ("localhost", "127.0.0.1"), password: bytes | None = b"changeit",
                        ) -> Issued:
        """A PKCS#12 keystore (Kafka's ssl.keystore.type=PKCS12, librdkafka's
        ssl.keystore.location): the key, its certificate and the CA, under ``password``
        (None: unencrypted)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        issued = self.issue(subject, server=server, sans=sans)
        key = serialization.load_pem_private_key(issued.key_pem, None)
        encryption: Any = (serialization.BestAvailableEncryption(password) if password
                           else serialization.NoEncryption())
        path.write_bytes(pkcs12.serialize_key_and_certificates(
            b"kcoord", key, x509.load_pem_x509_certificate(issued.cert_pem), [self.cert], encryption))  # type: ignore[arg-type]
        return issued

    def pkcs12_truststore(self, path: Path, password: bytes | None = b"changeit") -> Path:
        """A PKCS#12 truststore holding the CA, as keytool -importcert makes it."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        encryption: Any = (serialization.BestAvailableEncryption(password) if password
                           else serialization.NoEncryption())
        path.write_bytes(pkcs12.serialize_java_truststore([pkcs12.PKCS12Certificate(self.cert, b"ca")], encryption))
        return path
