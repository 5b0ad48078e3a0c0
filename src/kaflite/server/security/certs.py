"""Development certificates with `cryptography`: a CA, broker certificates for host names / addresses,
client certificates, all PEM, for trying TLS in one command (`kaflite certs`) and for the tests.

Not for production: the CA's key is written next to its certificate, unencrypted (unless a password is
given), with mode 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Issued", "make_ca", "issue"]


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, in PEM."""

    cert_pem: str
    key_pem: str

    def keystore_pem(self) -> str:
        """Kafka's PEM key store: the private key followed by the certificate chain, in one file."""
        return self.key_pem + self.cert_pem


def _name(subject: str):  # type: ignore[no-untyped-def]
    """An x509.Name from "CN=client,O=x" (RFC 4514 order: the last RDN first)."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    oids = {"CN": NameOID.COMMON_NAME, "O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
            "C": NameOID.COUNTRY_NAME, "L": NameOID.LOCALITY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME}
    attrs = []
    for part in subject.split(","):
        key, _, value = part.strip().partition("=")
        attrs.append(x509.NameAttribute(oids[key.strip().upper()], value.strip()))
    return x509.Name(list(reversed(attrs)))


def _key_pem(key, password: str | None) -> str:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization

    encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                  else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             encryption).decode()


def make_ca(subject: str = "CN=kaflite development CA", days: int = 3650) -> Issued:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = _name(subject)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key, None))


def issue(ca: Issued, subject: str, hosts: tuple[str, ...] = (), days: int = 825,
          key_password: str | None = None, not_after: datetime.datetime | None = None) -> Issued:
    """A certificate signed by `ca`: a server certificate when `hosts` are given (their DNS names and IP
    addresses as subject alternative names), a client certificate otherwise."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(not_after or now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
                       critical=False)
    )
    if hosts:
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False).add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    return Issued(cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key, key_password))


def write_private(path: Path, text: str) -> None:
    """Write a file readable by its owner only (keys)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
