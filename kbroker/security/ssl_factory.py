"""SslFactory: the TLS context of a listener (server side) or of an inter-broker link (client
side), from Kafka's ``ssl.*`` keys.

Keystores and truststores are PEM, as Kafka reads them with ``ssl.keystore.type=PEM`` /
``ssl.truststore.type=PEM``: a keystore is a file holding the private key and its certificate
chain (``ssl.keystore.location``) or the two as text (``ssl.keystore.key`` /
``ssl.keystore.certificate.chain``), the key optionally encrypted with ``ssl.key.password``; a
truststore is a file of CA certificates (``ssl.truststore.location``) or their text
(``ssl.truststore.certificates``). JKS and PKCS12 stores are refused with a ``SslConfigError``
naming the key and the file (convert them to PEM with openssl or keytool). Without a truststore
the system's CA certificates are trusted, as Java trusts its default one.

``ssl.client.auth`` (none | requested | required) is mTLS; ``ssl.enabled.protocols`` bounds the
TLS versions (TLSv1.2, TLSv1.3); ``ssl.cipher.suites`` takes Kafka's (IANA) names or OpenSSL's
for TLS 1.2 (Python cannot restrict TLS 1.3's suites; theirs are accepted and left as they are);
``ssl.endpoint.identification.algorithm=https`` makes a client check the server's name.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

PEM = "PEM"
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                 "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}


class SslConfigError(Exception):
    """A TLS setting that cannot be used; the message names the key (with its listener prefix)
    and the file."""


@dataclass(frozen=True, slots=True)
class SslSettings:
    """One listener's (or link's) ``ssl.*`` values; ``prefix`` is what the keys were read under
    (``listener.name.ssl.`` or ""), so errors name the key the user set."""

    prefix: str = ""
    keystore_type: str = "JKS"
    keystore_location: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    key_password: str | None = None
    truststore_type: str = "JKS"
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    endpoint_identification_algorithm: str = "https"


def server_context(settings: SslSettings) -> ssl.SSLContext:
    """A listener's context: its keystore, and its truststore when clients present certificates."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(context, settings)
    if settings.keystore_location is None and settings.keystore_certificate_chain is None:
        prefix = settings.prefix
        raise SslConfigError(f"{prefix}ssl.keystore.location (or {prefix}ssl.keystore.certificate.chain and "
                             f"{prefix}ssl.keystore.key) is required on an SSL listener")
    _load_keystore(context, settings)
    client_auth = settings.client_auth.lower()
    if client_auth not in CLIENT_AUTH:
        raise SslConfigError(f"Invalid value {settings.client_auth} for configuration {settings.prefix}ssl.client.auth:"
                             " String must be one of: required, requested, none")
    context.verify_mode = CLIENT_AUTH[client_auth]
    if client_auth != "none":
        _load_truststore(context, settings, ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(settings: SslSettings) -> ssl.SSLContext:
    """An inter-broker link's context: it trusts the truststore, checks the server's name per
    ``ssl.endpoint.identification.algorithm`` and presents the keystore (for mTLS) if there is one."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _common(context, settings)
    context.check_hostname = settings.endpoint_identification_algorithm.lower() == "https"
    _load_truststore(context, settings, ssl.Purpose.SERVER_AUTH)
    if settings.keystore_location is not None or settings.keystore_certificate_chain is not None:
        _load_keystore(context, settings)
    return context


def _common(context: ssl.SSLContext, settings: SslSettings) -> None:
    versions = []
    for name in settings.enabled_protocols:
        if name not in _PROTOCOLS:
            raise SslConfigError(f"{settings.prefix}ssl.enabled.protocols: {name} is not supported "
                                 f"(supported: {', '.join(_PROTOCOLS)})")
        versions.append(_PROTOCOLS[name])
    if not versions:
        raise SslConfigError(f"{settings.prefix}ssl.enabled.protocols names no protocol")
    context.minimum_version, context.maximum_version = min(versions), max(versions)
    tls12 = [_openssl_name(suite) for suite in settings.cipher_suites if suite not in _TLS13_SUITES]
    if tls12:
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise SslConfigError(f"{settings.prefix}ssl.cipher.suites: none of {', '.join(settings.cipher_suites)} "
                                 "is a cipher suite this system's OpenSSL supports") from None


def _openssl_name(suite: str) -> str:
    """Kafka's (IANA) name of a TLS 1.2 suite as OpenSSL names it, e.g.
    TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 -> ECDHE-RSA-AES128-GCM-SHA256; other names unchanged."""
    if not suite.startswith("TLS_") or "_WITH_" not in suite:
        return suite
    exchange, cipher = suite[4:].split("_WITH_", 1)
    cipher = cipher.replace("AES_128", "AES128").replace("AES_256", "AES256").replace("_POLY1305_SHA256", "_POLY1305")
    name = cipher if exchange == "RSA" else f"{exchange}_{cipher}"  # OpenSSL leaves plain RSA key exchange unnamed
    return name.replace("_", "-")


def _require_pem(settings: SslSettings, kind: str, store_type: str, location: str | None) -> None:
    if store_type.upper() != PEM:
        where = f" ({location})" if location else ""
        raise SslConfigError(
            f"{settings.prefix}ssl.{kind}.type={store_type}{where}: kbroker reads PEM stores only; convert the "
            f"{kind} to PEM (e.g. keytool -importkeystore to PKCS12, then openssl pkcs12 -nodes) and set "
            f"{settings.prefix}ssl.{kind}.type=PEM")


def _load_keystore(context: ssl.SSLContext, settings: SslSettings) -> None:
    _require_pem(settings, "keystore", settings.keystore_type, settings.keystore_location)
    password = settings.key_password
    try:
        if settings.keystore_location is not None:
            context.load_cert_chain(settings.keystore_location, password=password)
            return
        if settings.keystore_key is None:
            raise SslConfigError(f"{settings.prefix}ssl.keystore.certificate.chain is set without "
                                 f"{settings.prefix}ssl.keystore.key")
        assert settings.keystore_certificate_chain is not None
        with _private_file(settings.keystore_key + "\n" + settings.keystore_certificate_chain) as path:
            context.load_cert_chain(path, password=password)
    except (OSError, ssl.SSLError, ValueError) as exc:
        where = (f"{settings.prefix}ssl.keystore.location={settings.keystore_location}"
                 if settings.keystore_location is not None
                 else f"{settings.prefix}ssl.keystore.certificate.chain / {settings.prefix}ssl.keystore.key")
        raise SslConfigError(f"cannot load the keystore {where}: {_reason(exc)}") from None


def _load_truststore(context: ssl.SSLContext, settings: SslSettings, purpose: ssl.Purpose) -> None:
    if settings.truststore_location is None and settings.truststore_certificates is None:
        context.load_default_certs(purpose)
        return
    _require_pem(settings, "truststore", settings.truststore_type, settings.truststore_location)
    try:
        if settings.truststore_location is not None:
            context.load_verify_locations(cafile=settings.truststore_location)
        else:
            context.load_verify_locations(cadata=settings.truststore_certificates)
    except (OSError, ssl.SSLError, ValueError) as exc:
        where = (f"{settings.prefix}ssl.truststore.location={settings.truststore_location}"
                 if settings.truststore_location is not None else f"{settings.prefix}ssl.truststore.certificates")
        raise SslConfigError(f"cannot load the truststore {where}: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


@contextmanager
def _private_file(text: str) -> Iterator[str]:
    """``text`` in a file only this user can read, for the moment OpenSSL loads it (Python's ssl
    loads keys from files only); removed right after."""
    fd, path = tempfile.mkstemp(prefix="kbroker-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(text)
        yield path
    finally:
        os.unlink(path)
