"""SaslServerAuthenticator, driven frame by frame as a SASL listener's connection drives it:
Kafka's order (ApiVersions, SaslHandshake, SaslAuthenticate or bare tokens), what closes a
connection before authentication, the answers to an unknown mechanism and a wrong password,
and KIP-368 sessions (lifetime, re-authentication, expiry)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Sequence
from typing import Any

from kbroker.protocol.codec import decode_response, encode_request
from kbroker.protocol.errors import ErrorCode
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as HandshakeV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest as HandshakeV1

from kbroker.network.sasl_authenticator import AuthenticationStep, SaslListener, SaslServerAuthenticator
from kbroker.security.principal import KafkaPrincipal
from kbroker.security.sasl.plain import PlainServer

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
API_VERSIONS_ANSWER = struct.pack(">iihi", 10, 7, 0, 0) + b"\0\0"  # size, correlation id, no error, ...


class Factory:
    enabled_mechanisms: Sequence[str] = ("PLAIN",)

    def create(self, mechanism: str) -> PlainServer:
        return PlainServer(USERS)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _authenticator(max_reauth_ms: int = 0, clock: Clock | None = None) -> tuple[SaslServerAuthenticator, list[bytes]]:
    dispatched: list[bytes] = []

    async def dispatch(frame: bytearray) -> bytes:
        dispatched.append(bytes(frame))
        return API_VERSIONS_ANSWER

    listener = SaslListener(Factory(), {"PLAIN": max_reauth_ms}, failed_authentication_delay_ms=0)
    return SaslServerAuthenticator(listener, dispatch, "127.0.0.1:1", clock or Clock()), dispatched


def _frame(api_key: int, version: int, body: Any, correlation_id: int = 7) -> bytearray:
    return bytearray(encode_request(api_key, version, correlation_id, "test", body)[4:])


def _step(authenticator: SaslServerAuthenticator, frame: bytearray) -> AuthenticationStep:
    return asyncio.run(authenticator.handle(frame))


def _answer(step: AuthenticationStep, api_key: int, version: int) -> Any:
    assert step.response is not None
    return decode_response(api_key, version, step.response[4:])[1]


def _plain(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


def _authenticate(authenticator: SaslServerAuthenticator, password: str = "alice-secret",
                  user: str = "alice") -> Any:
    handshake = _answer(_step(authenticator, _frame(17, 1, HandshakeV1(mechanism="PLAIN"))), 17, 1)
    assert handshake.error_code == ErrorCode.none and list(handshake.mechanisms) == ["PLAIN"]
    step = _step(authenticator, _frame(36, 2, SaslAuthenticateRequest(auth_bytes=_plain(user, password))))
    return step, _answer(step, 36, 2)


def test_apiversions_then_handshake_then_authenticate_names_the_principal() -> None:
    authenticator, dispatched = _authenticator()
    api_versions = bytearray(struct.pack(">hhih", 18, 0, 7, -1))  # ApiVersions v0: header only
    assert _step(authenticator, api_versions) == AuthenticationStep(API_VERSIONS_ANSWER)
    assert dispatched == [bytes(api_versions)]  # answered by the handlers, as before authentication
    step, answer = _authenticate(authenticator)
    assert (answer.error_code, step.close) == (ErrorCode.none, False)
    assert answer.session_lifetime.total_seconds() == 0  # connections.max.reauth.ms unset
    assert authenticator.complete and authenticator.principal == KafkaPrincipal("User", "alice")


def test_a_request_before_the_handshake_closes_the_connection_unanswered() -> None:
    authenticator, _ = _authenticator()
    step = _step(authenticator, _frame(3, 12, metadata_v12.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)))
    assert step == AuthenticationStep(None, close=True)


def test_an_unknown_mechanism_is_answered_with_the_enabled_ones_then_closed() -> None:
    authenticator, _ = _authenticator()
    step = _step(authenticator, _frame(17, 1, HandshakeV1(mechanism="SCRAM-SHA-512")))
    answer = _answer(step, 17, 1)
    assert (answer.error_code, list(answer.mechanisms), step.close) == \
        (ErrorCode.unsupported_sasl_mechanism, ["PLAIN"], True)


def test_a_wrong_password_is_answered_with_kafkas_message_then_closed() -> None:
    authenticator, _ = _authenticator()
    step, answer = _authenticate(authenticator, password="wrong")
    assert (answer.error_code, answer.error_message, step.close) == (
        ErrorCode.sasl_authentication_failed, "Authentication failed: Invalid username or password", True)
    assert not authenticator.complete


def test_after_a_v0_handshake_tokens_come_bare() -> None:
    authenticator, _ = _authenticator()
    handshake = _answer(_step(authenticator, _frame(17, 0, HandshakeV0(mechanism="PLAIN"))), 17, 0)
    assert handshake.error_code == ErrorCode.none
    step = _step(authenticator, bytearray(_plain("bob", "bob-secret")))
    assert step.response == b"\0\0\0\0" and not step.close  # an empty token, size-prefixed
    assert authenticator.principal == KafkaPrincipal("User", "bob")


def test_a_session_lifetime_allows_reauthentication_and_expires() -> None:
    clock = Clock()
    authenticator, _ = _authenticator(max_reauth_ms=5000, clock=clock)
    _first, answer = _authenticate(authenticator)
    assert answer.session_lifetime.total_seconds() == 5
    request = _frame(3, 12, metadata_v12.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert not authenticator.takes(request)  # served by the handlers while the session lasts
    clock.now += 4
    handshake = _frame(17, 1, HandshakeV1(mechanism="PLAIN"))
    assert authenticator.takes(handshake)
    _again, answer = _authenticate(authenticator)  # re-authenticated on the same connection
    assert answer.error_code == ErrorCode.none and authenticator.complete
    clock.now += 6  # past the new session's end
    assert authenticator.takes(request)
    assert _step(authenticator, request) == AuthenticationStep(None, close=True)


def test_reauthentication_may_not_change_the_principal() -> None:
    clock = Clock()
    authenticator, _ = _authenticator(max_reauth_ms=5000, clock=clock)
    _authenticate(authenticator)
    clock.now += 2
    step, answer = _authenticate(authenticator, password="bob-secret", user="bob")
    assert answer.error_code == ErrorCode.sasl_authentication_failed and step.close
    assert answer.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"
