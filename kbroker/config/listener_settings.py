"""The builders of listener security: what each listener's protocol needs (TLS context, principal
mapping, SASL mechanisms) and what the node's own links to other nodes need to reach them.

Every ``ssl.*`` key is read per listener, ``listener.name.<listener>.<key>`` over ``<key>``, as
Kafka reads them; the SASL side (``sasl.enabled.mechanisms``, JAAS) is kbroker/security/sasl's
factory. The links: a broker reaches other brokers on the inter-broker listener
(``inter.broker.listener.name`` / ``security.inter.broker.protocol``) with
``sasl.mechanism.inter.broker.protocol``, and every node reaches the controllers on the first of
``controller.listener.names`` with ``sasl.mechanism.controller.protocol``; a link authenticates
as the ``username`` / ``password`` of that listener's login module and trusts its truststore.
Errors are ConfigErrors naming the key (and file) at fault.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from kbroker.config.kafka_config import ConfigError, KafkaConfig
from kbroker.network.listener_security import PLAINTEXT_LISTENER, SSL, ListenerSecurity
from kbroker.network.sasl_authenticator import SaslListener
from kbroker.replication.inter_broker_client import LinkSecurity
from kbroker.security.sasl.factory import SaslServerFactory, client_for
from kbroker.security.scram_credentials import ScramCredentials
from kbroker.security.ssl_factory import SslConfigError, SslSettings, client_context, server_context
from kbroker.security.ssl_principal_mapper import SslPrincipalMapper

_SSL_KEYS = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm",
)


def listener_securities(config: KafkaConfig, listeners: Iterable[str],
                        scram: ScramCredentials | None = None) -> dict[str, ListenerSecurity]:
    """Each listener's security, by name; ``scram`` is where SCRAM credentials are looked up."""
    return {name: listener_security(config, name, scram) for name in listeners}


def listener_security(config: KafkaConfig, listener: str, scram: ScramCredentials | None = None) -> ListenerSecurity:
    protocol = config.security_protocol(listener)
    if protocol == "PLAINTEXT":
        return PLAINTEXT_LISTENER
    context = None
    if protocol in (SSL, "SASL_SSL"):
        try:
            context = server_context(ssl_settings(config, listener))
        except SslConfigError as exc:
            raise ConfigError(f"listener {listener}: {exc}") from None
    mapper = None
    if protocol == SSL:
        key, rules = config.listener_value(listener, "ssl.principal.mapping.rules")
        try:
            mapper = SslPrincipalMapper(rules)
        except ValueError as exc:
            raise ConfigError(f"Invalid value {rules} for configuration {key}: {exc}") from None
    sasl = None
    if protocol.startswith("SASL_"):
        factory = SaslServerFactory(config, listener, scram)
        sasl = SaslListener(
            factory, {mechanism: _max_reauth_ms(config, listener, mechanism)
                      for mechanism in factory.enabled_mechanisms},
            failed_authentication_delay_ms=config.get_int("connection.failed.authentication.delay.ms"),
            max_receive_size=config.get_int("sasl.server.max.receive.size"),
        )
    return ListenerSecurity(protocol, context, mapper, sasl)


def _max_reauth_ms(config: KafkaConfig, listener: str, mechanism: str) -> int:
    """KIP-368's session bound: ``listener.name.<l>.<mechanism>.connections.max.reauth.ms`` over
    ``listener.name.<l>.connections.max.reauth.ms`` over ``connections.max.reauth.ms``."""
    key, value = config.listener_value(listener, f"{mechanism.lower()}.connections.max.reauth.ms")
    if value is None:
        key, value = config.listener_value(listener, "connections.max.reauth.ms")
    try:
        return int(value or 0)
    except ValueError:
        raise ConfigError(f"Invalid value {value} for configuration {key}: Not a number of type LONG") from None


def ssl_settings(config: KafkaConfig, listener: str) -> SslSettings:
    """A listener's ``ssl.*`` values, each ``listener.name.<listener>.``-prefixed key over the plain one."""
    values: dict[str, str | None] = {}
    prefixed = False
    for key in _SSL_KEYS:
        source, value = config.listener_value(listener, key)
        values[key] = value
        prefixed = prefixed or source != key

    def names(key: str) -> tuple[str, ...]:
        return tuple(part.strip() for part in (values[key] or "").split(",") if part.strip())

    return SslSettings(
        prefix=f"listener.name.{listener.lower()}." if prefixed else "",
        keystore_type=values["ssl.keystore.type"] or "JKS",
        keystore_location=values["ssl.keystore.location"] or None,
        keystore_certificate_chain=values["ssl.keystore.certificate.chain"] or None,
        keystore_key=values["ssl.keystore.key"] or None,
        key_password=values["ssl.key.password"] or None,
        truststore_type=values["ssl.truststore.type"] or "JKS",
        truststore_location=values["ssl.truststore.location"] or None,
        truststore_certificates=values["ssl.truststore.certificates"] or None,
        client_auth=values["ssl.client.auth"] or "none",
        enabled_protocols=names("ssl.enabled.protocols"),
        cipher_suites=names("ssl.cipher.suites"),
        endpoint_identification_algorithm=values["ssl.endpoint.identification.algorithm"] or "",
    )


def broker_link_security(config: KafkaConfig) -> LinkSecurity | None:
    """How this broker reaches other brokers (replica fetchers, transaction markers): their
    inter-broker listener; None for PLAINTEXT."""
    return _link_security(config, config.inter_broker_listener_name, "sasl.mechanism.inter.broker.protocol")


def controller_link_security(config: KafkaConfig) -> LinkSecurity | None:
    """How this node reaches the controllers (registration, heartbeats, metadata, Raft between
    voters): the first of controller.listener.names; None for PLAINTEXT or without one."""
    names = [n.strip().upper() for n in (config.get("controller.listener.names") or "").split(",") if n.strip()]
    if not names:
        return None
    return _link_security(config, names[0], "sasl.mechanism.controller.protocol")


def _link_security(config: KafkaConfig, listener: str, mechanism_key: str) -> LinkSecurity | None:
    protocol = config.security_protocol_map.get(listener, "PLAINTEXT")
    if protocol == "PLAINTEXT":
        return None
    context = None
    if protocol in (SSL, "SASL_SSL"):
        try:
            context = client_context(ssl_settings(config, listener))
        except SslConfigError as exc:
            raise ConfigError(f"listener {listener} (this node's client): {exc}") from None
    sasl_client = None
    if protocol.startswith("SASL_"):
        mechanism = config.get(mechanism_key) or ""
        client_for(config, listener, mechanism)  # a missing login module stops start-up now
        sasl_client = functools.partial(client_for, config, listener, mechanism)  # one exchange per connection
    return LinkSecurity(context, sasl_client)
