"""SASL/PLAIN (RFC 4616) against JAAS users, with Kafka's failure messages."""

from __future__ import annotations

import pytest

from kbroker.config.kafka_config import ConfigError, KafkaConfig
from kbroker.security.sasl import SaslAuthenticationError, SaslServerFactory, client_for

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"


@pytest.fixture
def factory() -> SaslServerFactory:
    config = KafkaConfig.load(None, ["sasl.enabled.mechanisms=PLAIN",
                                     f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}"])
    return SaslServerFactory(config, "SASL_PLAINTEXT")


@pytest.mark.parametrize("response", [b"\0alice\0alice-secret", b"alice\0alice\0alice-secret"])
def test_a_jaas_user_authenticates(factory: SaslServerFactory, response: bytes) -> None:
    server = factory.create("PLAIN")
    assert server.evaluate_response(response) == b""
    assert server.is_complete
    assert server.authorization_id == "alice"
    assert server.session_lifetime_ms is None


@pytest.mark.parametrize(("response", "message"), [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"admin\0alice\0alice-secret",
     "Authentication failed: Client requested an authorization id that is different from username"),
    (b"\0\0alice-secret", GENERIC),
    (b"\0alice\0", GENERIC),
    (b"alice-secret", GENERIC),
])
def test_failures_carry_kafkas_message(factory: SaslServerFactory, response: bytes, message: str) -> None:
    server = factory.create("PLAIN")
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate_response(response)
    assert failure.value.message == message
    assert not server.is_complete


def test_a_mechanism_not_enabled_is_a_value_error(factory: SaslServerFactory) -> None:
    assert factory.enabled_mechanisms == ["PLAIN"]
    with pytest.raises(ValueError):
        factory.create("SCRAM-SHA-256")


def test_the_inter_broker_client_logs_in_with_the_listeners_username(factory: SaslServerFactory) -> None:
    config = KafkaConfig.load(None, [f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}"])
    client = client_for(config, "SASL_PLAINTEXT", "PLAIN")
    server = factory.create("PLAIN")
    challenge = server.evaluate_response(client.initial_response())
    assert client.evaluate_challenge(challenge) is None
    assert client.is_complete and server.authorization_id == "admin"


def test_gssapi_and_a_mechanism_without_jaas_stop_start_up() -> None:
    with pytest.raises(ConfigError, match="GSSAPI"):
        SaslServerFactory(KafkaConfig.load(None, []), "SASL_PLAINTEXT")  # Kafka's default mechanism
    with pytest.raises(ConfigError, match=r"listener\.name\.sasl_plaintext\.plain\.sasl\.jaas\.config"):
        SaslServerFactory(KafkaConfig.load(None, ["sasl.enabled.mechanisms=PLAIN"]), "SASL_PLAINTEXT")
