"""Listener security from the configuration: Kafka's protocol map and its start-up errors,
``listener.name.<listener>.ssl.*`` over ``ssl.*``, and configuration errors that name the key
and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat.security.certificates import Certificates, make_certificates
from kbroker.config.kafka_config import ConfigError, KafkaConfig
from kbroker.config.listener_settings import listener_security, ssl_settings

NODE = ["process.roles=broker,controller", "controller.listener.names=CONTROLLER",
        "controller.quorum.voters=1@127.0.0.1:9093"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


def _load(*overrides: str) -> KafkaConfig:
    return KafkaConfig.load(None, [*NODE, *overrides])


def test_the_default_map_gives_the_controller_listener_plaintext_only_without_ssl_or_sasl() -> None:
    plain = _load("listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093")
    assert plain.security_protocol("CONTROLLER") == "PLAINTEXT"
    with pytest.raises(ConfigError, match="No security protocol defined for listener CONTROLLER"):
        _load("listeners=SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093")


def test_protocol_map_errors_are_kafkas() -> None:
    with pytest.raises(ConfigError, match=r"Invalid security protocol `TLS` defined in listener.security.protocol.map"):
        _load("listeners=PLAINTEXT://127.0.0.1:9092", "listener.security.protocol.map=PLAINTEXT:TLS")
    with pytest.raises(ConfigError, match=r"Only one of inter.broker.listener.name and security.inter.broker.protocol"):
        _load("listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
              "inter.broker.listener.name=PLAINTEXT", "security.inter.broker.protocol=PLAINTEXT")
    with pytest.raises(ConfigError, match=r"sasl.mechanism.inter.broker.protocol must be included in "
                                          r"sasl.enabled.mechanisms"):
        _load("listeners=SASL_PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
              "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
              "inter.broker.listener.name=SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol=PLAIN",
              "sasl.enabled.mechanisms=SCRAM-SHA-256")


def test_a_listener_key_overrides_the_plain_key(certs: Certificates) -> None:
    config = _load("listeners=SSL://127.0.0.1:9092,INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
                   "listener.security.protocol.map=SSL:SSL,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
                   "ssl.client.auth=requested", "listener.name.internal.ssl.client.auth=required",
                   "ssl.keystore.type=PEM", f"ssl.keystore.location={certs.broker.keystore}")
    assert (ssl_settings(config, "SSL").client_auth, ssl_settings(config, "INTERNAL").client_auth) == \
        ("requested", "required")
    assert ssl_settings(config, "INTERNAL").prefix == "listener.name.internal."
    assert ssl_settings(config, "INTERNAL").keystore_location == str(certs.broker.keystore)
    assert listener_security(config, "SSL").principal_mapper is not None


def test_inline_pem_keystore_and_truststore_load(certs: Certificates) -> None:
    config = _load("listeners=SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                   "listener.security.protocol.map=SSL:SSL,CONTROLLER:PLAINTEXT", "ssl.client.auth=required",
                   "ssl.keystore.type=PEM", f"ssl.keystore.key={certs.broker.key.read_text()}",
                   f"ssl.keystore.certificate.chain={certs.broker.certificate.read_text()}",
                   "ssl.truststore.type=PEM", f"ssl.truststore.certificates={certs.ca.read_text()}")
    assert listener_security(config, "SSL").ssl_context is not None


def test_a_jks_keystore_is_refused_naming_the_key_and_the_file(tmp_path: Path) -> None:
    config = _load("listeners=SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                   "listener.security.protocol.map=SSL:SSL,CONTROLLER:PLAINTEXT",
                   f"listener.name.ssl.ssl.keystore.location={tmp_path / 'broker.jks'}")
    with pytest.raises(ConfigError) as error:
        listener_security(config, "SSL")
    assert f"listener.name.ssl.ssl.keystore.type=JKS ({tmp_path / 'broker.jks'})" in str(error.value)
    assert "PEM" in str(error.value)


def test_a_missing_keystore_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    config = _load("listeners=SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                   "listener.security.protocol.map=SSL:SSL,CONTROLLER:PLAINTEXT",
                   "ssl.keystore.type=PEM", f"ssl.keystore.location={missing}")
    with pytest.raises(ConfigError, match=f"ssl.keystore.location={missing}: No such file or directory"):
        listener_security(config, "SSL")


def test_bad_principal_mapping_rules_name_the_key(certs: Certificates) -> None:
    config = _load("listeners=SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                   "listener.security.protocol.map=SSL:SSL,CONTROLLER:PLAINTEXT", "ssl.keystore.type=PEM",
                   f"ssl.keystore.location={certs.broker.keystore}", "ssl.principal.mapping.rules=DEFAULT/L")
    with pytest.raises(ConfigError, match=r"for configuration ssl.principal.mapping.rules: Invalid rule"):
        listener_security(config, "SSL")


def test_kafkas_cipher_suite_names_restrict_tls_1_2(certs: Certificates) -> None:
    config = _load("listeners=SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                   "listener.security.protocol.map=SSL:SSL,CONTROLLER:PLAINTEXT", "ssl.keystore.type=PEM",
                   f"ssl.keystore.location={certs.broker.keystore}",
                   "ssl.cipher.suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256")
    context = listener_security(config, "SSL").ssl_context
    assert context is not None
    tls12 = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert tls12 == {"ECDHE-ECDSA-AES128-GCM-SHA256"}
    bad = _load("listeners=SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                "listener.security.protocol.map=SSL:SSL,CONTROLLER:PLAINTEXT", "ssl.keystore.type=PEM",
                f"ssl.keystore.location={certs.broker.keystore}", "ssl.cipher.suites=TLS_NOPE_WITH_NOTHING")
    with pytest.raises(ConfigError, match=r"ssl.cipher.suites: none of TLS_NOPE_WITH_NOTHING"):
        listener_security(bad, "SSL")
