"""SaslServerAuthenticator: one SASL_PLAINTEXT / SASL_SSL connection's authentication, as
Kafka's broker runs it before the connection's requests reach the handlers.

A new connection may send ApiVersions (once), then SaslHandshake naming a mechanism, then the
mechanism's tokens: in SaslAuthenticate requests after a v1 handshake, or bare (size-prefixed, no
request header) after a v0 one, as old clients do. Anything else before authentication completes
closes the connection without an answer (Kafka answers another API after a v1 handshake with
ILLEGAL_SASL_STATE in that API's error response before closing; clients never send one there). A
mechanism the listener does not enable is answered
UNSUPPORTED_SASL_MECHANISM with the enabled list, a failed exchange SASL_AUTHENTICATION_FAILED with
the mechanism's message; every such failure is answered ``connection.failed.authentication.delay.ms``
later (awaited, not blocking the loop), and the connection then closes.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0, or a credential that expires,
a completed SaslAuthenticate (v1+) tells the client its session lifetime. Within it, the client
re-authenticates on the same connection with a new SaslHandshake and SaslAuthenticate (same
mechanism, same principal; at most once a second); a request arriving after the session expired
closes the connection, as Kafka's broker does.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kbroker.network.rate_limited_log import RateLimitedLogger
from kbroker.protocol.codec import (
    MalformedRequest,
    build,
    decode_request_body,
    encode_response,
    is_flexible,
    parse_request_header,
    request_schema,
    response_module,
)
from kbroker.protocol.errors import ErrorCode
from kbroker.security.principal import USER_TYPE, KafkaPrincipal
from kbroker.security.sasl.mechanism import SaslAuthenticationError, SaslServer

log = logging.getLogger(__name__)
_limited = RateLimitedLogger(log)

API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY = 18, 17, 36
HANDSHAKE_VERSIONS, AUTHENTICATE_VERSIONS = range(0, 2), range(0, 3)
MIN_REAUTH_INTERVAL_S = 1.0  # Kafka's: a second handshake within a second is not a re-authentication
_SIZE = struct.Struct(">i")
_NO_LIFETIME = datetime.timedelta(0)


class SaslServerFactory(Protocol):
    """A listener's mechanisms (sasl.enabled.mechanisms, with its JAAS configuration)."""

    @property
    def enabled_mechanisms(self) -> Sequence[str]: ...

    def create(self, mechanism: str) -> SaslServer: ...


@dataclass(frozen=True, slots=True)
class SaslListener:
    """What a SASL listener's connections authenticate with."""

    factory: SaslServerFactory
    # connections.max.reauth.ms by mechanism (absent or 0: sessions never expire)
    connections_max_reauth_ms: Mapping[str, int] = field(default_factory=dict)
    failed_authentication_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    max_receive_size: int = 524_288  # sasl.server.max.receive.size: frames before authentication


class _State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "handshake or ApiVersions"
    HANDSHAKE = "handshake"  # after ApiVersions
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"


@dataclass(frozen=True, slots=True)
class AuthenticationStep:
    """What the connection does with a frame the authenticator took: send ``response`` (if any),
    then close when ``close``."""

    response: bytes | None
    close: bool = False


# (frame) -> the response the node's handlers give it (the connection's principal is ANONYMOUS)
Dispatch = Callable[[bytearray], Awaitable[Any]]


class SaslServerAuthenticator:
    def __init__(self, listener: SaslListener, dispatch: Dispatch, peer: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.listener = listener
        self.peer = peer
        self._dispatch = dispatch
        self._clock = clock
        self._state = _State.HANDSHAKE_OR_VERSIONS
        self._headers = True  # SaslAuthenticate requests (handshake v1), else bare tokens (v0)
        self._server: SaslServer | None = None
        self.mechanism: str | None = None  # the authenticated mechanism
        self._requested_mechanism = ""  # the handshake's
        self.principal: KafkaPrincipal | None = None  # once authenticated
        self._session_expiry: float | None = None  # clock time the session ends (KIP-368)
        self._reauth_started: float | None = None
        self._supports_reauth = False  # the client sent SaslAuthenticate v1+

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def max_frame_size(self) -> int | None:
        """The largest frame accepted now (sasl.server.max.receive.size until authenticated)."""
        return None if self.complete else self.listener.max_receive_size

    def takes(self, frame: bytearray) -> bool:
        """Whether ``frame`` is the authenticator's: every frame until authentication completes;
        after it, a handshake that starts a re-authentication, or any request once the session
        has expired (answered by closing the connection)."""
        if not self.complete:
            return True
        if _api_key(frame) == SASL_HANDSHAKE_KEY and self._may_reauthenticate():
            return True
        return self._session_expiry is not None and self._clock() > self._session_expiry

    async def handle(self, frame: bytearray) -> AuthenticationStep:
        if self.complete:
            if _api_key(frame) == SASL_HANDSHAKE_KEY and self._may_reauthenticate():
                return await self._begin_reauthentication(frame)
            _limited.info("closing %s: its SASL session expired (connections.max.reauth.ms) and it did not "
                          "re-authenticate", self.peer)
            return AuthenticationStep(None, close=True)
        if self._state is _State.AUTHENTICATE and not self._headers:
            return await self._bare_token(frame)
        try:
            header, body = _parse(frame)
        except MalformedRequest as exc:
            _limited.info("closing %s: malformed request during SASL authentication: %s", self.peer, exc)
            return AuthenticationStep(None, close=True)
        key, version = header.api_key, header.api_version
        if self._state is _State.AUTHENTICATE:
            if key != SASL_AUTHENTICATE_KEY:
                # Kafka answers ILLEGAL_SASL_STATE in that API's error response; clients never send
                # one here (they wait for SaslAuthenticate), so the connection just closes.
                return await self._fail(
                    f"Unexpected Kafka request of type {_api_name(key, version)} during SASL authentication.", None)
            if version not in AUTHENTICATE_VERSIONS:
                _limited.info("closing %s: SaslAuthenticate v%d is not supported", self.peer, version)
                return AuthenticationStep(None, close=True)
            return await self._authenticate(header, body)
        if key == API_VERSIONS_KEY and self._state is _State.HANDSHAKE_OR_VERSIONS:
            response = await self._dispatch(frame)
            if not isinstance(response, bytes):
                return AuthenticationStep(None, close=True)
            if response[8:10] == b"\0\0":  # answered without error: the handshake must come next
                self._state = _State.HANDSHAKE
            return AuthenticationStep(response)
        if key != SASL_HANDSHAKE_KEY or version not in HANDSHAKE_VERSIONS:
            # Kafka's IllegalSaslStateException: no answer, the connection closes after the delay.
            return await self._fail(
                f"Unexpected Kafka request of type {_api_name(key, version)} during SASL handshake.", None)
        return await self._handshake(header, body)

    # --- the steps ------------------------------------------------------------------------

    async def _handshake(self, header: Any, request: Any) -> AuthenticationStep:
        mechanism = self._requested_mechanism = request.mechanism
        enabled = tuple(self.listener.factory.enabled_mechanisms)
        m = response_module(SASL_HANDSHAKE_KEY, header.api_version)
        if mechanism not in enabled:
            response = encode_response(header.correlation_id, SASL_HANDSHAKE_KEY, build(
                m.SaslHandshakeResponse, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=enabled))
            return await self._fail(f"Unsupported SASL mechanism {mechanism}", response)
        answer = encode_response(header.correlation_id, SASL_HANDSHAKE_KEY,
                                 build(m.SaslHandshakeResponse, error_code=ErrorCode.none, mechanisms=enabled))
        if self.mechanism is not None and mechanism != self.mechanism:  # re-authentication
            # Kafka answers the handshake, then fails the exchange that follows.
            self._state = _State.AUTHENTICATE
            self._server = None
            return AuthenticationStep(answer)
        self._headers = header.api_version >= 1
        self._server = self.listener.factory.create(mechanism)
        self._state = _State.AUTHENTICATE
        return AuthenticationStep(answer)

    async def _authenticate(self, header: Any, request: Any) -> AuthenticationStep:
        m = response_module(SASL_AUTHENTICATE_KEY, header.api_version)
        self._supports_reauth = self._supports_reauth or header.api_version > 0
        try:
            challenge = self._evaluate(bytes(request.auth_bytes))
        except SaslAuthenticationError as exc:
            response = encode_response(header.correlation_id, SASL_AUTHENTICATE_KEY, build(
                m.SaslAuthenticateResponse, error_code=ErrorCode.sasl_authentication_failed,
                error_message=exc.message, auth_bytes=b"", session_lifetime=_NO_LIFETIME))
            return await self._fail(exc.message, response)
        lifetime_ms = self._complete() if self._server is not None and self._server.is_complete else 0
        return AuthenticationStep(encode_response(header.correlation_id, SASL_AUTHENTICATE_KEY, build(
            m.SaslAuthenticateResponse, error_code=ErrorCode.none, error_message=None, auth_bytes=challenge,
            session_lifetime=datetime.timedelta(milliseconds=lifetime_ms))))

    async def _bare_token(self, frame: bytearray) -> AuthenticationStep:
        """A token without a Kafka header (after a v0 handshake): the answer is the bare token."""
        try:
            challenge = self._evaluate(bytes(frame))
        except SaslAuthenticationError as exc:
            return await self._fail(exc.message, None)
        if self._server is not None and self._server.is_complete:
            self._complete()
        return AuthenticationStep(_SIZE.pack(len(challenge)) + challenge)

    def _evaluate(self, token: bytes) -> bytes:
        if self._server is None:  # a re-authentication that asked for another mechanism
            raise SaslAuthenticationError(
                f"SASL mechanism '{self._requested_mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self.mechanism}'")
        challenge = self._server.evaluate_response(token)
        if self._server.is_complete and self.principal is not None:
            principal = KafkaPrincipal(USER_TYPE, self._server.authorization_id)
            if principal != self.principal:
                raise SaslAuthenticationError(
                    f"Cannot change principals during re-authentication from {self.principal.principal_type}."
                    f"{self.principal.name}: {principal.principal_type}.{principal.name}")
        return challenge or b""

    def _complete(self) -> int:
        """Authenticated: the principal and, with KIP-368, the session lifetime (ms; 0: none)."""
        assert self._server is not None
        self.principal = KafkaPrincipal(USER_TYPE, self._server.authorization_id)
        self.mechanism = self._server.mechanism
        self._state = _State.COMPLETE
        now = self._clock()
        max_reauth_ms = self.listener.connections_max_reauth_ms.get(self.mechanism, 0)
        credential_expiry_ms = self._server.session_lifetime_ms  # a token's exp (epoch ms), if any
        lifetimes = [max_reauth_ms] if max_reauth_ms > 0 else []
        if credential_expiry_ms is not None:
            lifetimes.append(credential_expiry_ms - int(time.time() * 1000))
        if not lifetimes:
            self._session_expiry = None
            return 0
        lifetime_ms = max(0, min(lifetimes))
        self._session_expiry = now + lifetime_ms / 1000
        return lifetime_ms

    def _may_reauthenticate(self) -> bool:
        """Kafka re-authenticates only a session that expires, at most once a second."""
        if self._session_expiry is None:
            return False
        return self._reauth_started is None or self._clock() - self._reauth_started >= MIN_REAUTH_INTERVAL_S

    async def _begin_reauthentication(self, frame: bytearray) -> AuthenticationStep:
        self._reauth_started = self._clock()
        self._state = _State.HANDSHAKE
        try:
            header, body = _parse(frame)
        except MalformedRequest as exc:
            _limited.info("closing %s: malformed SaslHandshake: %s", self.peer, exc)
            return AuthenticationStep(None, close=True)
        if header.api_version not in HANDSHAKE_VERSIONS:
            return AuthenticationStep(None, close=True)
        return await self._handshake(header, body)

    async def _fail(self, message: str, response: bytes | None) -> AuthenticationStep:
        """Kafka's failed authentication: the answer (if any) after the delay, then close."""
        _limited.info("closing %s: SASL authentication failed: %s", self.peer, message, key="sasl failed")
        delay_ms = self.listener.failed_authentication_delay_ms
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000)
        return AuthenticationStep(response, close=True)


def _parse(frame: bytearray) -> tuple[Any, Any]:
    view = memoryview(frame)
    if len(view) < 8:
        raise MalformedRequest("frame shorter than a request header")
    api_key, api_version = struct.unpack_from(">hh", view, 0)
    schema = request_schema(api_key, api_version)
    header, offset = parse_request_header(view, is_flexible(api_key, api_version))
    body = None
    if schema is not None and api_key in (SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY):
        body = decode_request_body(schema, view, offset)
    return header, body


def _api_key(frame: bytearray) -> int:
    return int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1


def _api_name(api_key: int, api_version: int) -> str:
    """Kafka's name of an API (``METADATA``), as its messages print it."""
    schema = request_schema(api_key, api_version)
    if schema is None:
        return str(api_key)
    name = schema.__name__.removesuffix("Request")
    return "".join("_" + ch if ch.isupper() and i else ch for i, ch in enumerate(name)).upper()
