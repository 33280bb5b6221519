"""SASL/OAUTHBEARER: RFC 7628 messages, Kafka's unsecured tokens and its JSON error challenge,
signed JWTs against a JWKS file or an https endpoint on loopback, and KIP-368's session bound."""

from __future__ import annotations

import base64
import datetime
import http.server
import json
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

from kbroker.config.kafka_config import ConfigError, KafkaConfig
from kbroker.security.sasl import SaslAuthenticationError, SaslServerFactory, client_for
from kbroker.security.sasl.jwt_validator import JwksSource, JwtSettings
from kbroker.security.sasl.oauthbearer import initial_response

NOW_MS = 1_700_000_000_000
NOW_S = NOW_MS // 1000
LISTENER = "SASL_PLAINTEXT"
UNSECURED_JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                  'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="kafka" '
                  "unsecuredLoginListClaim_scope=\",kafka,other\";")
JWT_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
# Kafka's broker logs in on the listener at start even when it validates signed JWTs there.
JWT_LISTENER_JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                     'unsecuredLoginStringClaim_sub="broker";')


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def factory(*settings: str, jaas: str = UNSECURED_JAAS) -> SaslServerFactory:
    config = KafkaConfig.load(None, ["sasl.enabled.mechanisms=OAUTHBEARER",
                                     f"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config={jaas}", *settings])
    return SaslServerFactory(config, LISTENER, clock_ms=lambda: NOW_MS)


def unsigned(claims: dict[str, object]) -> str:
    return f"{b64url(json.dumps({'alg': 'none'}).encode())}.{b64url(json.dumps(claims).encode())}."


def fails_with_challenge(server_factory: SaslServerFactory, token: str) -> str:
    """The error challenge the server answers ``token`` with, then the failure after the client's \\x01."""
    server = server_factory.create("OAUTHBEARER")
    challenge = server.evaluate_response(initial_response(token)).decode()
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate_response(b"\x01")
    assert failure.value.message == challenge
    assert not server.is_complete
    return challenge


def test_the_inter_broker_clients_unsecured_token_authenticates_until_it_expires() -> None:
    config = KafkaConfig.load(None, ["sasl.enabled.mechanisms=OAUTHBEARER",
                                     f"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config={UNSECURED_JAAS}"])
    client = client_for(config, LISTENER, "OAUTHBEARER")
    server = SaslServerFactory(config, LISTENER).create("OAUTHBEARER")  # both on the wall clock
    response = client.initial_response()
    assert response.startswith(b"n,,\x01auth=Bearer ") and response.endswith(b"\x01\x01")
    assert server.evaluate_response(response) == b""
    assert client.evaluate_challenge(b"") is None and client.is_complete
    assert server.authorization_id == "admin"
    # the token expires unsecuredLoginLifetimeSeconds (3600 s) after the client minted it
    now_ms = time.time() * 1000
    assert server.session_lifetime_ms is not None and now_ms < server.session_lifetime_ms <= now_ms + 3_600_000


def test_unsecured_token_failures_are_kafkas_json_challenges() -> None:
    servers = factory()
    assert fails_with_challenge(servers, unsigned({"sub": "a", "exp": NOW_S - 1, "scope": "kafka"})) == (
        '{"status":"invalid_token"}')
    assert fails_with_challenge(servers, unsigned({"sub": "a", "exp": NOW_S + 60})) == (
        '{"status":"insufficient_scope", "scope":"[kafka]"}')
    assert fails_with_challenge(servers, unsigned({"exp": NOW_S + 60, "scope": "kafka"})) == (
        '{"status":"invalid_token"}')
    assert fails_with_challenge(servers, "not-a-jws") == '{"status":"invalid_token"}'


def test_the_session_may_last_until_the_tokens_expiry() -> None:
    token = unsigned({"sub": "alice", "exp": NOW_S + 600, "scope": ["kafka"]})
    server = factory().create("OAUTHBEARER")
    assert server.evaluate_response(initial_response(token, {"traceId": "x"})) == b""
    assert (server.authorization_id, server.session_lifetime_ms) == ("alice", NOW_MS + 600_000)


def test_a_malformed_initial_response_or_another_authzid_fails() -> None:
    token = unsigned({"sub": "alice", "exp": NOW_S + 600, "scope": "kafka"})
    generic = "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"
    for response in (b"n,,auth=Bearer x", f"n,,\x01auth=Basic {token}\x01\x01".encode()):
        with pytest.raises(SaslAuthenticationError, match=generic):
            factory().create("OAUTHBEARER").evaluate_response(response)
    with pytest.raises(SaslAuthenticationError, match=r"authorization id \(bob\) that is different"):
        factory().create("OAUTHBEARER").evaluate_response(f"n,a=bob,\x01auth=Bearer {token}\x01\x01".encode())


# --- signed JWTs -----------------------------------------------------------------------------

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwk(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, kid: str) -> dict[str, str]:
    if isinstance(key, rsa.RSAPrivateKey):
        numbers = key.public_key().public_numbers()
        return {"kty": "RSA", "kid": kid, "use": "sig", "n": b64url(numbers.n.to_bytes(256, "big")),
                "e": b64url(numbers.e.to_bytes(3, "big"))}
    point = key.public_key().public_numbers()
    return {"kty": "EC", "kid": kid, "crv": "P-256", "x": b64url(point.x.to_bytes(32, "big")),
            "y": b64url(point.y.to_bytes(32, "big"))}


def signed(claims: dict[str, object], key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, kid: str) -> str:
    alg = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"
    head = f"{b64url(json.dumps({'alg': alg, 'kid': kid}).encode())}.{b64url(json.dumps(claims).encode())}"
    if isinstance(key, rsa.RSAPrivateKey):
        signature = key.sign(head.encode(), padding.PKCS1v15(), hashes.SHA256())
    else:
        r, s = decode_dss_signature(key.sign(head.encode(), ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{head}.{b64url(signature)}"


def claims(**overrides: object) -> dict[str, object]:
    return {"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 300, "iss": "https://issuer.test",
            "aud": "kafka", "scope": "kafka.read", **overrides}


@pytest.fixture(scope="module")
def jwks_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk(RSA_KEY, "rsa-1"), jwk(EC_KEY, "ec-1")]}))
    return path


def jwt_factory(url: str, *extra: str) -> SaslServerFactory:
    return factory(f"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class={JWT_HANDLER}",
                   f"sasl.oauthbearer.jwks.endpoint.url={url}", "sasl.oauthbearer.expected.audience=kafka",
                   "sasl.oauthbearer.expected.issuer=https://issuer.test", *extra,
                   jaas=JWT_LISTENER_JAAS)


@pytest.mark.parametrize(("key", "kid"), [(RSA_KEY, "rsa-1"), (EC_KEY, "ec-1")])
def test_rs256_and_es256_tokens_signed_by_a_jwks_key_authenticate(jwks_file: Path, key, kid: str) -> None:
    server = jwt_factory(jwks_file.as_uri()).create("OAUTHBEARER")
    assert server.evaluate_response(initial_response(signed(claims(), key, kid))) == b""
    assert (server.authorization_id, server.session_lifetime_ms) == ("alice", NOW_MS + 300_000)


@pytest.mark.parametrize("token", [
    signed(claims(), OTHER_KEY, "rsa-1"),                      # signed by a key the set does not hold
    signed(claims(), RSA_KEY, "unknown"),                      # a key id the set does not hold
    unsigned(claims()),                                        # alg none
    signed(claims(exp=NOW_S - 31), RSA_KEY, "rsa-1"),          # expired beyond the 30 s skew
    signed(claims(nbf=NOW_S + 31), RSA_KEY, "rsa-1"),          # not yet valid
    signed(claims(iat=None), RSA_KEY, "rsa-1"),                # no iat
    signed(claims(aud="other"), RSA_KEY, "rsa-1"),             # another audience
    signed(claims(iss="https://evil.test"), RSA_KEY, "rsa-1"),  # another issuer
    signed(claims(sub=""), RSA_KEY, "rsa-1"),                  # no subject
])
def test_bad_jwts_are_invalid_tokens(jwks_file: Path, token: str) -> None:
    assert fails_with_challenge(jwt_factory(jwks_file.as_uri()), token) == '{"status":"invalid_token"}'


def test_within_clock_skew_and_a_custom_subject_claim(jwks_file: Path) -> None:
    servers = jwt_factory(jwks_file.as_uri(), "sasl.oauthbearer.sub.claim.name=client_id",
                          "sasl.oauthbearer.clock.skew.seconds=60")
    server = servers.create("OAUTHBEARER")
    server.evaluate_response(initial_response(signed(claims(exp=NOW_S - 30, client_id="svc"), RSA_KEY, "rsa-1")))
    assert server.authorization_id == "svc"


def test_an_audience_without_expected_audiences_is_refused_as_jose4j_does(jwks_file: Path) -> None:
    servers = factory(f"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class={JWT_HANDLER}",
                      f"sasl.oauthbearer.jwks.endpoint.url={jwks_file.as_uri()}",
                      jaas=JWT_LISTENER_JAAS)
    fails_with_challenge(servers, signed(claims(), RSA_KEY, "rsa-1"))
    server = servers.create("OAUTHBEARER")
    server.evaluate_response(initial_response(signed(claims(aud=None, iss=None), RSA_KEY, "rsa-1")))
    assert server.is_complete


def test_misconfigurations_stop_start_up(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sasl\.oauthbearer\.jwks\.endpoint\.url"):
        jwt_factory((tmp_path / "missing.json").as_uri())
    with pytest.raises(ConfigError, match="not supported by kbroker"):
        factory("listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=com.example.Mine")
    # As Kafka's broker, which logs in with an unsecured token at start: no principal, no start.
    with pytest.raises(ConfigError, match="No principal name in JWT claim: sub"):
        factory(jaas='org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                     'unsecuredLoginStringClaim_name="x";')


@pytest.fixture
def https_jwks(tmp_path: Path) -> Iterator[tuple[str, ssl.SSLContext, list[bytes]]]:
    """A JWKS served over TLS on loopback by a certificate the test makes; the served body can change."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
                   .sign(key, hashes.SHA256()))
    (tmp_path / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    body = [json.dumps({"keys": [jwk(RSA_KEY, "rsa-1")]}).encode()]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body[0])

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server.socket = server_context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client_context = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    try:
        yield f"https://localhost:{server.server_address[1]}/jwks.json", client_context, body
    finally:
        server.shutdown()
        server.server_close()


def test_an_https_jwks_is_fetched_and_refetched_for_an_unknown_key_id(https_jwks) -> None:
    url, context, body = https_jwks
    source = JwksSource(JwtSettings(url, retry_backoff_ms=0), lambda: NOW_MS, context)
    assert [k.key_id for k in source.keys] == ["rsa-1"]
    body[0] = json.dumps({"keys": [jwk(RSA_KEY, "rsa-1"), jwk(EC_KEY, "ec-1")]}).encode()
    assert source.candidates("ec-1") == []  # judged on the keys at hand; a refresh starts
    deadline = time.monotonic() + 10
    while not any(k.key_id == "ec-1" for k in source.keys) and time.monotonic() < deadline:
        time.sleep(0.01)  # the refresh thread's fetch, awaited with a deadline
    assert [k.key_id for k in source.candidates("ec-1")] == ["ec-1"]


def test_an_untrusted_https_endpoint_stops_start_up(https_jwks) -> None:
    url, _context, _body = https_jwks
    with pytest.raises(ConfigError, match="cannot read the JWKS"):
        JwksSource(JwtSettings(url), lambda: NOW_MS, ssl.create_default_context())
