"""SASL/OAUTHBEARER (RFC 7628) as Kafka runs it: the client's initial response, the server's
answer, Kafka's unsecured JWS tokens (its development default) and the broker's own client.

Client initial response: a GS2 header, then key/value pairs each ended by ``\\x01`` and a final
``\\x01``::

    n,,\\x01auth=Bearer <token>\\x01[<extension>=<value>\\x01]...\\x01

A token that does not validate is answered with an error challenge, Kafka's JSON
``{"status":"invalid_token"}`` (``insufficient_scope`` with the required ``scope`` when a
scope is missing); the client acknowledges it with a lone ``\\x01`` and the exchange fails with
that JSON as the message. Extensions are accepted and ignored, as Kafka's validators accept them.
The session may last until the token's ``exp`` (KIP-368: ``session_lifetime_ms``).

Unsecured tokens (``OAuthBearerUnsecuredValidatorCallbackHandler``, used when the listener names
no server callback handler): a JWS with ``"alg":"none"`` and an empty signature, claims
``exp`` (required), ``iat`` (optional), the principal claim (``unsecuredValidatorPrincipalClaimName``,
default ``sub``), the scope claim (``unsecuredValidatorScopeClaimName``, default ``scope``) holding
every scope of ``unsecuredValidatorRequiredScope``, with ``unsecuredValidatorAllowableClockSkewMs``
of leeway. Never for production: anyone can mint one.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kbroker.security.sasl.jaas import JaasLoginModule
from kbroker.security.sasl.mechanism import OAUTHBEARER, SaslAuthenticationError, invalid_credentials

SEPARATOR = "\x01"
INVALID_TOKEN = "invalid_token"
INSUFFICIENT_SCOPE = "insufficient_scope"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*)\x01")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")


@dataclass(frozen=True, slots=True)
class OAuthBearerToken:
    """A validated token: who it names, its scopes and when it expires (epoch ms)."""

    principal_name: str
    scope: frozenset[str]
    lifetime_ms: int


class TokenValidationError(Exception):
    """A token refused: ``status`` (RFC 6750's error code) and, for a missing scope, the scope
    required. The text is for the broker's debug log only; clients see the status."""

    def __init__(self, reason: str, status: str = INVALID_TOKEN, scope: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope


TokenValidator = Callable[[str], OAuthBearerToken]


def error_challenge(error: TokenValidationError) -> str:
    """Kafka's JSON error challenge, spaced as Kafka writes it: ``{"status":"insufficient_scope",
    "scope":"[read, write]"}``."""
    text = f'{{"status":{json.dumps(error.status)}'
    if error.scope is not None:
        text += f', "scope":{json.dumps(error.scope)}'
    return text + "}"


def b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def decode_jws(token: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    """(header, claims, signing input, signature) of a compact JWS (TokenValidationError)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenValidationError("a JWS has three dot-separated parts")
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except (ValueError, binascii.Error) as exc:
        raise TokenValidationError(f"malformed JWS: {exc}") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise TokenValidationError("the JWS header and claims must be JSON objects")
    return header, claims, f"{parts[0]}.{parts[1]}".encode("ascii"), signature


def scope_of(value: object) -> frozenset[str]:
    """A scope claim: a space-separated string or a list of strings."""
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return frozenset(value)
    raise TokenValidationError("the scope claim must be a string or a list of strings")


def number_claim(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenValidationError(f"Required claim missing: {name}")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenValidationError(f"The {name} claim must be a number")
    return float(value)


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler, configured from the listener's
    OAuthBearerLoginModule options."""

    def __init__(self, options: Mapping[str, str], clock_ms: Callable[[], int]) -> None:
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub"
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope"
        self.required_scope = options.get("unsecuredValidatorRequiredScope", "").split()
        self.clock_skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0)
        self.clock_ms = clock_ms

    def __call__(self, token: str) -> OAuthBearerToken:
        header, claims, _signing_input, signature = decode_jws(token)
        if header.get("alg") != "none" or signature:
            raise TokenValidationError("an unsecured JWS has alg none and no signature")
        now_ms = self.clock_ms()
        expiry = number_claim(claims, "exp", required=True)
        assert expiry is not None
        issued = number_claim(claims, "iat", required=False)
        if issued is not None and issued * 1000 > now_ms + self.clock_skew_ms:
            raise TokenValidationError("The indicated time is too far in the future (iat)")
        if expiry * 1000 <= now_ms - self.clock_skew_ms:
            raise TokenValidationError("The indicated time is too far in the past (exp)")
        if issued is not None and expiry < issued:
            raise TokenValidationError("The expiration time must not be before the issued-at time")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenValidationError(f"Required claim missing or empty: {self.principal_claim}")
        scope = scope_of(claims.get(self.scope_claim))
        missing = [s for s in self.required_scope if s not in scope]
        if missing:
            # Kafka names the required scope as a Java list prints: [read, write]
            raise TokenValidationError(f"The provided scope lacks {missing}", INSUFFICIENT_SCOPE,
                                       f"[{', '.join(self.required_scope)}]")
        return OAuthBearerToken(principal, scope, int(expiry * 1000))


class OAuthBearerServer:
    """One OAUTHBEARER exchange on the server."""

    mechanism = OAUTHBEARER

    def __init__(self, validate: TokenValidator) -> None:
        self._validate = validate
        self._error: str | None = None
        self._token: OAuthBearerToken | None = None

    def evaluate_response(self, response: bytes) -> bytes:
        if self._error is not None:
            error, self._error = self._error, None
            if response == SEPARATOR.encode():
                raise SaslAuthenticationError(error)  # the client's acknowledgement of our error
            raise invalid_credentials(self.mechanism)
        if self._token is not None:
            raise invalid_credentials(self.mechanism)
        match = _INITIAL_RESPONSE.fullmatch(response.decode("utf-8", "replace"))
        if match is None:
            raise invalid_credentials(self.mechanism)
        pairs = dict(item.split("=", 1) for item in match["kvpairs"].split(SEPARATOR) if item)
        auth = _AUTH.fullmatch(pairs.get("auth", ""))
        if auth is None or auth["scheme"].lower() != "bearer":
            raise invalid_credentials(self.mechanism)
        try:
            token = self._validate(auth["token"])
        except TokenValidationError as exc:
            self._error = error_challenge(exc)
            return self._error.encode()
        authzid = (match["authzid"] or "").replace("=2C", ",").replace("=3D", "=")
        if authzid and authzid != token.principal_name:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different from "
                f"the token's principal name ({token.principal_name})")
        self._token = token
        return b""

    @property
    def is_complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        if self._token is None:
            raise RuntimeError("Authentication exchange has not completed")
        return self._token.principal_name

    @property
    def session_lifetime_ms(self) -> int | None:
        return self._token.lifetime_ms if self._token is not None else None


def unsecured_token(options: Mapping[str, str], now_ms: int) -> str:
    """The token Kafka's OAuthBearerUnsecuredLoginCallbackHandler mints from the login module's
    options: ``unsecuredLoginStringClaim_<name>``, ``unsecuredLoginNumberClaim_<name>``,
    ``unsecuredLoginListClaim_<name>`` (its first character separates the items),
    ``unsecuredLoginLifetimeSeconds`` (3600), with ``iat`` and ``exp`` set. ValueError, with
    Kafka's reason, when the options make no token (no principal claim, a number that is not)."""
    claims: dict[str, Any] = {}
    for key, value in options.items():
        if key.startswith("unsecuredLoginStringClaim_"):
            claims[key.removeprefix("unsecuredLoginStringClaim_")] = value
        elif key.startswith("unsecuredLoginNumberClaim_"):
            number = float(value)
            claims[key.removeprefix("unsecuredLoginNumberClaim_")] = int(number) if number.is_integer() else number
        elif key.startswith("unsecuredLoginListClaim_") and value:
            claims[key.removeprefix("unsecuredLoginListClaim_")] = [item for item in value[1:].split(value[0]) if item]
    principal_claim = options.get("unsecuredLoginPrincipalClaimName", "").strip() or "sub"
    if not isinstance(claims.get(principal_claim), str) or not claims[principal_claim].strip():
        raise ValueError(f"No principal name in JWT claim: {principal_claim}")
    lifetime_s = int(options.get("unsecuredLoginLifetimeSeconds", "3600") or 3600)
    claims["iat"] = now_ms / 1000
    claims["exp"] = now_ms / 1000 + lifetime_s
    header = _b64url(json.dumps({"alg": "none"}).encode())
    return f"{header}.{_b64url(json.dumps(claims).encode())}."


def initial_response(token: str, extensions: Mapping[str, str] | None = None) -> bytes:
    pairs = "".join(f"{key}={value}{SEPARATOR}" for key, value in (extensions or {}).items())
    return f"n,,{SEPARATOR}auth=Bearer {token}{SEPARATOR}{pairs}{SEPARATOR}".encode()


class OAuthBearerClient:
    """The broker's own OAUTHBEARER login with an unsecured token from its login module's
    options (Kafka's default login callback handler); answers an error challenge with ``\\x01``."""

    mechanism = OAUTHBEARER

    def __init__(self, token: str, extensions: Mapping[str, str] | None = None) -> None:
        self._token = token
        self._extensions = dict(extensions or {})
        self._complete = False

    @classmethod
    def from_jaas(cls, module: JaasLoginModule, now_ms: int | None = None) -> OAuthBearerClient:
        extensions = {key.removeprefix("unsecuredLoginExtension_"): value for key, value in module.options.items()
                      if key.startswith("unsecuredLoginExtension_")}
        return cls(unsecured_token(module.options, int(time.time() * 1000) if now_ms is None else now_ms),
                   extensions)

    def initial_response(self) -> bytes:
        return initial_response(self._token, self._extensions)

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        if challenge:
            return SEPARATOR.encode()  # the server's error: acknowledge it, the server then fails us
        self._complete = True
        return None

    @property
    def is_complete(self) -> bool:
        return self._complete
