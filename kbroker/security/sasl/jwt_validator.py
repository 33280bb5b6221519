"""Kafka's OAuthBearerValidatorCallbackHandler: OAUTHBEARER tokens that are signed JWTs, checked
against the keys of a JWKS (``sasl.oauthbearer.jwks.endpoint.url``: ``file://`` or ``https://``).

The checks are Kafka's (its jose4j consumer): a signature by a key of the set (RS256/384/512,
PS256/384/512, ES256/384/512; ``alg: none`` refused), ``exp`` and ``iat`` required, ``exp``
not passed and ``nbf`` reached within ``sasl.oauthbearer.clock.skew.seconds``, ``aud`` among
``sasl.oauthbearer.expected.audience`` (with none expected a token naming an audience is
refused, as jose4j refuses it), ``iss`` equal to ``sasl.oauthbearer.expected.issuer`` when set,
the subject in ``sasl.oauthbearer.sub.claim.name`` (``sub``) and the scopes in
``sasl.oauthbearer.scope.claim.name`` (``scope``). Every refusal is ``invalid_token`` to the
client. Signatures are verified with ``cryptography``.

An https set is fetched at start (a failure stops start-up) and again after
``sasl.oauthbearer.jwks.endpoint.refresh.ms`` or when a token names a key id the set lacks (at
most once per ``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms``), in a thread, so
authentication never waits on the network: the token that asked for the refresh is judged on the
keys at hand. Deviation: Kafka 4's ``org.apache.kafka.sasl.oauthbearer.allowed.urls`` (a JVM
system property) has no counterpart.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from kbroker.config.kafka_config import ConfigError
from kbroker.security.sasl.oauthbearer import (
    OAuthBearerToken,
    TokenValidationError,
    b64url_decode,
    decode_jws,
    number_claim,
    scope_of,
)

log = logging.getLogger(__name__)

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
_HASHES: dict[str, type[hashes.HashAlgorithm]] = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_CURVES: dict[str, ec.EllipticCurve] = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}
_CURVE_OF_ALG = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
FETCH_TIMEOUT_S = 10


@dataclass(frozen=True, slots=True)
class JwtSettings:
    """The ``sasl.oauthbearer.*`` keys the validator reads."""

    jwks_url: str
    expected_audience: Sequence[str] = ()
    expected_issuer: str | None = None
    sub_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    clock_skew_seconds: int = 30
    refresh_ms: int = 3_600_000
    retry_backoff_ms: int = 100


@dataclass(frozen=True, slots=True)
class Jwk:
    key_id: str | None
    algorithm: str | None
    key: PublicKey


def _int(value: str) -> int:
    return int.from_bytes(b64url_decode(value), "big")


def parse_jwks(text: str | bytes) -> list[Jwk]:
    """The signing keys of a JWK set (RSA and EC public keys; others are skipped)."""
    document = json.loads(text)
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("a JWK set is a JSON object with a 'keys' list")
    keys: list[Jwk] = []
    for entry in document["keys"]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        key: PublicKey
        if entry.get("kty") == "RSA":
            key = rsa.RSAPublicNumbers(_int(entry["e"]), _int(entry["n"])).public_key()
        elif entry.get("kty") == "EC" and entry.get("crv") in _CURVES:
            key = ec.EllipticCurvePublicNumbers(_int(entry["x"]), _int(entry["y"]),
                                                _CURVES[entry["crv"]]).public_key()
        else:
            continue
        keys.append(Jwk(entry.get("kid"), entry.get("alg"), key))
    return keys


def verify_signature(algorithm: str, key: PublicKey, signing_input: bytes, signature: bytes) -> bool:
    family, bits = algorithm[:2], algorithm[2:]
    digest = _HASHES.get(bits)
    if digest is None:
        return False
    try:
        if family in ("RS", "PS") and isinstance(key, rsa.RSAPublicKey):
            pad: padding.AsymmetricPadding = (
                padding.PKCS1v15() if family == "RS"
                else padding.PSS(mgf=padding.MGF1(digest()), salt_length=digest.digest_size))
            key.verify(signature, signing_input, pad, digest())
            return True
        if family == "ES" and isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == (
                _CURVES[_CURVE_OF_ALG[algorithm]].name if algorithm in _CURVE_OF_ALG else ""):
            # A JWS carries r and s side by side; cryptography takes them DER-encoded.
            half = len(signature) // 2
            if half == 0 or len(signature) % 2:
                return False
            der = encode_dss_signature(int.from_bytes(signature[:half], "big"), int.from_bytes(signature[half:], "big"))
            key.verify(der, signing_input, ec.ECDSA(digest()))
            return True
    except InvalidSignature:
        return False
    return False


class JwksSource:
    """The current keys of a JWKS file or URL."""

    def __init__(self, settings: JwtSettings, clock_ms: Callable[[], int],
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.url = settings.jwks_url
        self.refresh_ms = settings.refresh_ms
        self.retry_backoff_ms = settings.retry_backoff_ms
        self.clock_ms = clock_ms
        self.ssl_context = ssl_context
        self._lock = threading.Lock()
        self._refreshing = False
        self._last_attempt_ms = 0
        if not self.url.startswith(("file://", "https://")):
            raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url must be a file:// or https:// URL, got {self.url}")
        try:
            self.keys = self._fetch()
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"cannot read the JWKS at sasl.oauthbearer.jwks.endpoint.url {self.url}: {exc}") from None
        self._fetched_ms = clock_ms()

    def _fetch(self) -> list[Jwk]:
        with urllib.request.urlopen(self.url, timeout=FETCH_TIMEOUT_S, context=self.ssl_context) as answer:
            return parse_jwks(answer.read())

    def candidates(self, key_id: str | None) -> list[Jwk]:
        now = self.clock_ms()
        keys = self.keys
        stale = self.url.startswith("https://") and now - self._fetched_ms >= self.refresh_ms
        unknown = key_id is not None and all(k.key_id != key_id for k in keys)
        if (stale or (unknown and self.url.startswith("https://"))):
            self._refresh_in_background(now)
        return [k for k in keys if key_id is None or k.key_id == key_id]

    def _refresh_in_background(self, now: int) -> None:
        with self._lock:
            if self._refreshing or now - self._last_attempt_ms < self.retry_backoff_ms:
                return
            self._refreshing = True
            self._last_attempt_ms = now
        threading.Thread(target=self._refresh, name="jwks-refresh", daemon=True).start()

    def _refresh(self) -> None:
        try:
            keys = self._fetch()
            self.keys, self._fetched_ms = keys, self.clock_ms()
        except (OSError, ValueError, KeyError) as exc:
            log.warning("JWKS refresh from %s failed (the previous keys stay in use): %s", self.url, exc)
        finally:
            with self._lock:
                self._refreshing = False


class JwtValidator:
    """Validates a signed JWT access token into an OAuthBearerToken (TokenValidationError)."""

    def __init__(self, settings: JwtSettings, keys: JwksSource, clock_ms: Callable[[], int]) -> None:
        self.settings = settings
        self.keys = keys
        self.clock_ms = clock_ms

    def __call__(self, token: str) -> OAuthBearerToken:
        header, claims, signing_input, signature = decode_jws(token)
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm.lower() == "none":
            raise TokenValidationError("an unsigned JWT ('none' algorithm) is refused")
        key_id = header.get("kid") if isinstance(header.get("kid"), str) else None
        if not any(verify_signature(algorithm, k.key, signing_input, signature)
                   for k in self.keys.candidates(key_id) if k.algorithm in (None, algorithm)):
            raise TokenValidationError(f"no key of the JWKS verifies the signature (kid {key_id})")
        self._check_claims(claims)
        subject = claims.get(self.settings.sub_claim_name)
        if not isinstance(subject, str) or not subject.strip():
            raise TokenValidationError(f"the {self.settings.sub_claim_name} claim must be a non-empty string")
        expiry = number_claim(claims, "exp", required=True)
        assert expiry is not None
        return OAuthBearerToken(subject.strip(), scope_of(claims.get(self.settings.scope_claim_name)),
                                int(expiry * 1000))

    def _check_claims(self, claims: Mapping[str, Any]) -> None:
        now_s = self.clock_ms() / 1000
        skew = self.settings.clock_skew_seconds
        expiry = number_claim(claims, "exp", required=True)
        number_claim(claims, "iat", required=True)
        not_before = number_claim(claims, "nbf", required=False)
        if expiry is not None and now_s - skew >= expiry:
            raise TokenValidationError("the JWT has expired")
        if not_before is not None and now_s + skew < not_before:
            raise TokenValidationError("the JWT is not yet valid (nbf)")
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if self.settings.expected_audience:
            if not set(audiences) & set(self.settings.expected_audience):
                raise TokenValidationError("the JWT's audience is not an expected one")
        elif audience is not None:
            raise TokenValidationError("the JWT names an audience but no expected audience is configured")
        if self.settings.expected_issuer is not None and claims.get("iss") != self.settings.expected_issuer:
            raise TokenValidationError("the JWT's issuer is not the expected one")
