"""SASL/SCRAM-SHA-256/512: RFC 7677's exchange byte for byte, client against server, and
Kafka's failures (one message for a wrong password and an unknown user)."""

from __future__ import annotations

import base64

import pytest
from kbroker.replication.quorum.metadata_image import MetadataImage
from kbroker.replication.quorum.metadata_records import UserScramCredentialRecord
from kbroker.replication.quorum.scram_control_manager import credential_record

from kbroker.config.kafka_config import KafkaConfig
from kbroker.security.sasl import SaslAuthenticationError, SaslServerFactory, client_for
from kbroker.security.sasl.scram import ScramClient, ScramServer, salted_password
from kbroker.security.scram_credentials import SCRAM_MECHANISM_CODES, ScramCredentials

# RFC 7677 section 3: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def credential(user: str, password: str, mechanism: str = "SCRAM-SHA-256", salt: bytes = RFC_SALT,
               iterations: int = 4096) -> UserScramCredentialRecord:
    return credential_record(user, SCRAM_MECHANISM_CODES[mechanism], salt,
                             salted_password(mechanism, password, salt, iterations), iterations)


def lookup_in(*records: UserScramCredentialRecord) -> ScramCredentials:
    image = MetadataImage()
    for offset, record in enumerate(records):
        image.apply(offset, record)
    return ScramCredentials(lambda: image)


def test_rfc_7677_server() -> None:
    server = ScramServer("SCRAM-SHA-256", lookup_in(credential("user", "pencil")).lookup,
                         nonce=lambda: RFC_SERVER_NONCE)
    assert server.evaluate_response(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.is_complete
    assert server.evaluate_response(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.is_complete and server.authorization_id == "user"


def test_rfc_7677_client() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=lambda: RFC_CLIENT_NONCE)
    assert client.initial_response() == RFC_CLIENT_FIRST
    assert client.evaluate_challenge(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert client.evaluate_challenge(RFC_SERVER_FINAL) is None
    assert client.is_complete


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_and_server_agree_names_with_commas_and_equals(mechanism: str) -> None:
    store = lookup_in(credential("a,b=c", "s3cret", mechanism, salt=b"0123456789abcdef", iterations=8192))
    server = ScramServer(mechanism, store.lookup)
    client = ScramClient(mechanism, "a,b=c", "s3cret")
    assert b"n=a=2Cb=3Dc," in client.initial_response()
    final = server.evaluate_response(client.initial_response())
    final = server.evaluate_response(client.evaluate_challenge(final) or b"")
    assert client.evaluate_challenge(final) is None
    assert server.authorization_id == "a,b=c"


GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "alice-secret")])
def test_wrong_password_and_unknown_user_fail_alike(user: str, password: str) -> None:
    server = ScramServer("SCRAM-SHA-256", lookup_in(credential("alice", "alice-secret")).lookup)
    client = ScramClient("SCRAM-SHA-256", user, password)
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate_response(client.evaluate_challenge(server.evaluate_response(client.initial_response()))
                                 or b"")
    assert failure.value.message == GENERIC
    assert not server.is_complete


def test_an_unknown_user_gets_a_decoy_challenge_like_a_known_one() -> None:
    store = lookup_in(credential("alice", "alice-secret", salt=b"k5xqmz1w0c3v8n2b7l4j6h9g0f"))

    def server_first(user: str) -> bytes:
        server = ScramServer("SCRAM-SHA-256", store.lookup, nonce=lambda: "server")
        return server.evaluate_response(f"n,,n={user},r=client".encode())

    known, unknown = server_first("alice"), server_first("mallory")
    assert known.startswith(b"r=clientserver,s=") and known.endswith(b",i=4096")
    assert unknown.startswith(b"r=clientserver,s=") and unknown.endswith(b",i=4096")
    assert len(known) == len(unknown) and unknown == server_first("mallory") != server_first("trudy")


@pytest.mark.parametrize("first", [
    b"garbage", b"p=tls-unique,,n=alice,r=abc", b"n,,n=alice,r=abc,tokenauth=true",
])
def test_malformed_or_token_first_messages_fail_generically(first: bytes) -> None:
    server = ScramServer("SCRAM-SHA-256", lookup_in(credential("alice", "alice-secret")).lookup)
    with pytest.raises(SaslAuthenticationError, match=GENERIC):
        server.evaluate_response(first)


def test_another_authorization_id_has_kafkas_message() -> None:
    server = ScramServer("SCRAM-SHA-256", lookup_in(credential("alice", "alice-secret")).lookup)
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different from username"):
        server.evaluate_response(b"n,a=admin,n=alice,r=abc")


def test_a_replayed_final_message_with_another_nonce_fails() -> None:
    store = lookup_in(credential("user", "pencil"))
    server = ScramServer("SCRAM-SHA-256", store.lookup)  # a fresh server nonce: the RFC's final no longer fits
    server.evaluate_response(RFC_CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationError, match=GENERIC):
        server.evaluate_response(RFC_CLIENT_FINAL)


def test_the_client_refuses_a_server_that_does_not_know_the_password() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=lambda: RFC_CLIENT_NONCE)
    client.evaluate_challenge(RFC_SERVER_FIRST)
    with pytest.raises(SaslAuthenticationError, match="server signature"):
        client.evaluate_challenge(b"v=" + base64.b64encode(bytes(32)))


def test_the_factory_serves_scram_from_the_image_and_the_inter_broker_client_uses_scram_login_module() -> None:
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
            'password="admin-secret";')
    config = KafkaConfig.load(None, ["sasl.enabled.mechanisms=SCRAM-SHA-512",
                                     f"listener.name.broker.scram-sha-512.sasl.jaas.config={jaas}"])
    store = lookup_in(credential("admin", "admin-secret", "SCRAM-SHA-512"))
    server = SaslServerFactory(config, "BROKER", store).create("SCRAM-SHA-512")
    client = client_for(config, "BROKER", "SCRAM-SHA-512")
    final = server.evaluate_response(client.initial_response())
    final = server.evaluate_response(client.evaluate_challenge(final) or b"")
    assert client.evaluate_challenge(final) is None
    assert server.authorization_id == "admin"
    # Without a credential store (no metadata image yet) nobody authenticates.
    unstored = SaslServerFactory(config, "BROKER").create("SCRAM-SHA-512")
    client = client_for(config, "BROKER", "SCRAM-SHA-512")
    final = client.evaluate_challenge(unstored.evaluate_response(client.initial_response()))
    with pytest.raises(SaslAuthenticationError):
        unstored.evaluate_response(final or b"")
