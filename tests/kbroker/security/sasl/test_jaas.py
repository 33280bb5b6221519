"""JAAS login configuration as Kafka parses it, and where a broker finds a mechanism's."""

from __future__ import annotations

import pytest

from kbroker.config.kafka_config import ConfigError, KafkaConfig
from kbroker.security.sasl.jaas import PLAIN_LOGIN_MODULE, parse_jaas_config, server_login_module

PLAIN_JAAS = (f'{PLAIN_LOGIN_MODULE} required username="admin" password="admin-secret" '
              'user_admin="admin-secret" user_alice="alice-secret";')


def test_a_plain_login_module_with_users() -> None:
    [module] = parse_jaas_config(PLAIN_JAAS)
    assert module.login_module == PLAIN_LOGIN_MODULE
    assert module.control_flag == "required"
    assert module.options == {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
                              "user_alice": "alice-secret"}


def test_quoted_values_keep_separators_and_escapes_comments_are_skipped() -> None:
    [module] = parse_jaas_config(
        "org.example.Module optional /* a comment */ a=\"x;y=z\" b='single' c=word-with_$.chars "
        "d=\"q\\\"uote\" // trailing\n;")
    assert module.control_flag == "optional"
    assert module.options == {"a": "x;y=z", "b": "single", "c": "word-with_$.chars", "d": 'q"uote'}


@pytest.mark.parametrize(("text", "reason"), [
    ("org.example.Module required a=\"1\"", "JAAS config entry not terminated by semi-colon"),
    ("org.example.Module required a=;", "Value not specified for key 'a' in JAAS config"),
    ("org.example.Module required a=123;", "Value not specified for key 'a' in JAAS config"),
    ("org.example.Module mandatory;", "Invalid login module control flag 'mandatory' in JAAS config"),
    ("org.example.Module", "Login module control flag not specified in JAAS config"),
])
def test_malformed_configs_fail_with_kafkas_reason(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_jaas_config(text)


def test_the_listener_and_mechanism_key_wins_and_errors_name_the_key_not_the_secret() -> None:
    config = KafkaConfig.load(None, [
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        f"plain.sasl.jaas.config={PLAIN_LOGIN_MODULE} required user_bob=\"bob-secret\";",
        "listener.name.other.plain.sasl.jaas.config=org.example.Module required password=\"hunter2\"",
    ])
    assert "user_alice" in server_login_module(config, "SASL_PLAINTEXT", "PLAIN").options
    assert server_login_module(config, "PLAIN_TOO", "PLAIN").options == {"user_bob": "bob-secret"}
    with pytest.raises(ConfigError) as failure:
        server_login_module(config, "OTHER", "PLAIN")
    assert "listener.name.other.plain.sasl.jaas.config" in str(failure.value)
    assert "hunter2" not in str(failure.value)


def test_two_modules_in_one_value_and_a_missing_config_are_refused() -> None:
    config = KafkaConfig.load(None, [
        f"listener.name.a.plain.sasl.jaas.config={PLAIN_JAAS} {PLAIN_JAAS}",
        "sasl.jaas.config=org.example.Module required;",  # a broker ignores the bare key, as Kafka's
    ])
    with pytest.raises(ConfigError, match="contains 2 login modules, should be 1 module"):
        server_login_module(config, "A", "PLAIN")
    with pytest.raises(ConfigError, match=r"listener\.name\.b\.scram-sha-256\.sasl\.jaas\.config"):
        server_login_module(config, "B", "SCRAM-SHA-256")


def test_repr_hides_the_options() -> None:
    [module] = parse_jaas_config(PLAIN_JAAS)
    assert "admin-secret" not in repr(module)
