"""The certificates one secured test run needs, made fresh with ``cryptography`` in a scratch directory.

Two certificate authorities: the trusted CA signs the broker's certificate (valid for
127.0.0.1 and localhost) and a client certificate (CN=alice); the other CA signs a client
certificate no broker trusts (CN=mallory), for "a client certificate from another CA". Every
file is PEM, as Kafka takes it with ``ssl.keystore.type=PEM`` / ``ssl.truststore.type=PEM``:
a keystore file holds the private key (unencrypted PKCS#8) followed by its certificate chain.
Nothing here is ever committed: each run writes its own files under its own directory.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Valid from an hour ago: a broker and a client on one machine share its clock, but a certificate
# whose not-before lies a second in the future is refused.
VALIDITY = datetime.timedelta(days=2)
BACKDATE = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its key as PEM files: ``certificate`` (the chain), ``key`` (PKCS#8),
    and ``keystore`` (key then chain in one file, Kafka's PEM keystore layout)."""

    certificate: Path
    key: Path
    keystore: Path


@dataclass(frozen=True)
class Certificates:
    """Everything a secured run reads: the trusted CA (``ca``: a PEM truststore), the broker's
    key pair, a trusted client's and an untrusted client's (signed by ``other_ca``)."""

    ca: Path
    other_ca: Path
    broker: KeyPair
    client: KeyPair
    untrusted_client: KeyPair


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kbroker compat"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])  # fmt: skip


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())  # fmt: skip


def _authority(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name)).issuer_name(_name(common_name))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE).not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return key, cert


def _leaf(
    directory: Path, stem: str, common_name: str, authority: tuple[ec.EllipticCurvePrivateKey, x509.Certificate],
    server: bool,
) -> KeyPair:
    ca_key, ca_cert = authority
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name)).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE).not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                              else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    )  # fmt: skip
    if server:  # clients verify the broker's name: 127.0.0.1 is what they dial
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(serialization.Encoding.PEM)
    pair = KeyPair(directory / f"{stem}.crt", directory / f"{stem}.key", directory / f"{stem}.keystore.pem")
    pair.certificate.write_bytes(chain)
    pair.key.write_bytes(_pem_key(key))
    pair.keystore.write_bytes(_pem_key(key) + chain)
    return pair


def make_certificates(directory: Path) -> Certificates:
    """Write a fresh set of CAs, key pairs and PEM stores under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    trusted = _authority("kbroker compat CA")
    other = _authority("another CA")
    ca, other_ca = directory / "ca.crt", directory / "other-ca.crt"
    ca.write_bytes(trusted[1].public_bytes(serialization.Encoding.PEM))
    other_ca.write_bytes(other[1].public_bytes(serialization.Encoding.PEM))
    return Certificates(
        ca=ca, other_ca=other_ca,
        broker=_leaf(directory, "broker", "broker", trusted, server=True),
        client=_leaf(directory, "alice", "alice", trusted, server=False),
        untrusted_client=_leaf(directory, "mallory", "mallory", other, server=False),
    )  # fmt: skip
