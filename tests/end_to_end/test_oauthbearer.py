"""SASL/OAUTHBEARER against a real kbroker with real clients: Kafka's unsecured tokens on one
listener, signed JWTs checked against a JWKS file on another, and refused tokens answered with
Kafka's JSON error as librdkafka reports it.

One node: PLAINTEXT, ``SASL_PLAINTEXT`` (OAUTHBEARER with Kafka's default unsecured validator)
and ``JWT`` (SASL_PLAINTEXT too, with OAuthBearerValidatorCallbackHandler, an RSA key the test
makes in its JWKS, expected audience and issuer).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import aiokafka
import aiokafka.abc
import kafka
import pytest
from confluent_kafka import KafkaError, Producer
from cryptography.hazmat.primitives.asymmetric import rsa
from kafka.net.sasl.oauth import AbstractTokenProvider

from tests.broker_process import BrokerProcess, free_port
from tests.kbroker.security.sasl.test_oauthbearer import RSA_KEY, jwk, signed, unsigned

OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ISSUER, AUDIENCE = "https://issuer.test", "kafka"
UNSECURED_JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                  'unsecuredLoginStringClaim_sub="admin";')
TIMEOUT_S = 15


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    workdir = tmp_path_factory.mktemp("oauth")
    jwks = workdir / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk(RSA_KEY, "rsa-1")]}))
    unsecured_port, jwt_port = free_port(), free_port()
    broker = BrokerProcess(str(workdir / "data"), overrides={
        "listeners": "PLAINTEXT://127.0.0.1:{port},"
                     f"SASL_PLAINTEXT://127.0.0.1:{unsecured_port},JWT://127.0.0.1:{jwt_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,JWT:SASL_PLAINTEXT,"
                                          "CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": UNSECURED_JAAS,
        # Kafka's broker logs in on every OAUTHBEARER listener at start, so it needs a principal claim
        "listener.name.jwt.oauthbearer.sasl.jaas.config": UNSECURED_JAAS,
        "listener.name.jwt.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
    })
    broker.overrides["listeners"] = broker.overrides["listeners"].format(port=broker.port)
    broker.start()
    try:
        yield {"unsecured": f"127.0.0.1:{unsecured_port}", "jwt": f"127.0.0.1:{jwt_port}"}
    finally:
        broker.close()


def jwt(key: rsa.RSAPrivateKey = RSA_KEY, **claims: object) -> str:
    now = int(time.time())
    return signed({"sub": "alice", "iat": now, "exp": now + 300, "iss": ISSUER, "aud": AUDIENCE, **claims},
                  key, "rsa-1")


def confluent(bootstrap: str, **auth: object) -> list[KafkaError]:
    """Produce one record (delivery errors), or stop at the first authentication error."""
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "OAUTHBEARER", "message.timeout.ms": 10_000,
                         "error_cb": errors.append, **auth})
    producer.produce("oauth-topic", b"v", on_delivery=lambda err, _msg: errors.append(err) if err else None)
    deadline = time.monotonic() + TIMEOUT_S
    while producer.flush(0.1) and time.monotonic() < deadline:
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            break
    return errors


def token_callback(token: str):  # librdkafka's oauth_cb: (token, expiry in seconds since the epoch)
    return lambda _config: (token, time.time() + 300)


def test_librdkafkas_unsecured_token_authenticates_and_an_expired_one_gets_kafkas_json(node) -> None:
    assert confluent(node["unsecured"], **{"sasl.oauthbearer.config": "principal=alice",
                                           "enable.sasl.oauthbearer.unsecure.jwt": True}) == []
    expired = unsigned({"sub": "alice", "exp": time.time() - 60})
    errors = confluent(node["unsecured"], oauth_cb=token_callback(expired))
    assert errors[0].code() == KafkaError._AUTHENTICATION
    assert 'SASL authentication error: {"status":"invalid_token"} (after' in errors[0].str()


def test_a_signed_jwt_authenticates_with_every_client(node) -> None:
    token = jwt()
    assert confluent(node["jwt"], oauth_cb=token_callback(token)) == []

    class KafkaPythonToken(AbstractTokenProvider):
        def token(self) -> str:
            return token

    admin = kafka.KafkaAdminClient(bootstrap_servers=node["jwt"], security_protocol="SASL_PLAINTEXT",
                                   sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=KafkaPythonToken())
    try:
        assert "oauth-topic" in admin.list_topics()
    finally:
        admin.close()

    class AiokafkaToken(aiokafka.abc.AbstractTokenProvider):
        async def token(self) -> str:
            return token

    async def produce() -> int:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=node["jwt"], security_protocol="SASL_PLAINTEXT",
                                             sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=AiokafkaToken())
        await producer.start()
        try:
            return (await producer.send_and_wait("oauth-topic", b"v")).offset
        finally:
            await producer.stop()
    assert asyncio.run(produce()) >= 1


@pytest.mark.parametrize("token", [
    pytest.param(lambda: jwt(OTHER_KEY), id="signed-by-another-key"),
    pytest.param(lambda: jwt(exp=int(time.time()) - 120), id="expired"),
    pytest.param(lambda: jwt(aud="other"), id="another-audience"),
    pytest.param(lambda: jwt(iss="https://evil.test"), id="another-issuer"),
    pytest.param(lambda: unsigned({"sub": "alice", "exp": time.time() + 300}), id="unsigned"),
])
def test_bad_jwts_are_refused_as_invalid_tokens(node, token) -> None:
    errors = confluent(node["jwt"], oauth_cb=token_callback(token()))
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert 'SASL authentication error: {"status":"invalid_token"} (after' in errors[0].str()
