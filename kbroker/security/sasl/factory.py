"""A listener's SASL mechanisms: which are enabled, each one's server built from its JAAS login
module, and the broker's own client for the inter-broker listener.

``sasl.enabled.mechanisms`` (or ``listener.name.<listener>.sasl.enabled.mechanisms``) names the
mechanisms a SaslHandshake may pick; each needs its login module on the listener (see jaas.py),
as Kafka refuses to start without one.

A listener's OAUTHBEARER validates Kafka's unsecured tokens unless
``listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class`` names Kafka's
OAuthBearerValidatorCallbackHandler: then signed JWTs, with the ``sasl.oauthbearer.*`` keys (each
may be prefixed by ``listener.name.<listener>.oauthbearer.`` or ``listener.name.<listener>.``).
Other callback handler classes are Java code kbroker cannot run: they stop start-up.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kbroker.config.kafka_config import ConfigError, KafkaConfig
from kbroker.security.sasl.jaas import JaasLoginModule, server_login_module
from kbroker.security.sasl.jwt_validator import JwksSource, JwtSettings, JwtValidator
from kbroker.security.sasl.mechanism import OAUTHBEARER, PLAIN, SUPPORTED_MECHANISMS, SaslClient, SaslServer
from kbroker.security.sasl.oauthbearer import OAuthBearerClient, OAuthBearerServer, TokenValidator, UnsecuredValidator
from kbroker.security.sasl.plain import PlainClient, PlainServer
from kbroker.security.sasl.scram import HASHES, ScramClient, ScramServer
from kbroker.security.scram_credentials import ScramCredentials

ENABLED_MECHANISMS = "sasl.enabled.mechanisms"
CALLBACK_HANDLER = "sasl.server.callback.handler.class"
LOGIN_CALLBACK_HANDLER = "sasl.login.callback.handler.class"
JWT_CALLBACK_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",  # Kafka 3.x
)


def _listener_key(listener_name: str, key: str) -> str:
    return f"listener.name.{listener_name.lower()}.{key}"


def _first(config: KafkaConfig, *keys: str) -> tuple[str, str | None]:
    """The first of ``keys`` that is set (key, value); the last key with its default otherwise."""
    for key in keys:
        if key in config.explicit:
            return key, config.explicit[key]
    return keys[-1], config.get(keys[-1])


def enabled_mechanisms(config: KafkaConfig, listener_name: str) -> list[str]:
    _key, raw = _first(config, _listener_key(listener_name, ENABLED_MECHANISMS), ENABLED_MECHANISMS)
    return [m.strip() for m in (raw or "").split(",") if m.strip()]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _no_credentials(user: str, mechanism: str) -> None:
    return None


class SaslServerFactory:
    """The SASL servers of one listener; built once, at start, so a bad JAAS config stops start-up."""

    def __init__(self, config: KafkaConfig, listener_name: str, scram: ScramCredentials | None = None,
                 clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.listener_name = listener_name
        self.enabled_mechanisms = enabled_mechanisms(config, listener_name)
        self._scram = scram
        self._clock_ms = clock_ms
        self._builders: dict[str, Callable[[], SaslServer]] = {}
        for mechanism in self.enabled_mechanisms:
            if mechanism not in SUPPORTED_MECHANISMS:
                key, _raw = _first(config, _listener_key(listener_name, ENABLED_MECHANISMS), ENABLED_MECHANISMS)
                raise ConfigError(f"SASL mechanism {mechanism} in {key} is not supported by kbroker "
                                  f"(it has {', '.join(SUPPORTED_MECHANISMS)})")
            module = server_login_module(config, listener_name, mechanism)
            self._builders[mechanism] = self._builder(config, mechanism, module)

    def _builder(self, config: KafkaConfig, mechanism: str, module: JaasLoginModule) -> Callable[[], SaslServer]:
        mechanism_key = f"{mechanism.lower()}.{CALLBACK_HANDLER}"
        handler_key, handler = _first(config, _listener_key(self.listener_name, mechanism_key), mechanism_key)
        if handler and not (mechanism == OAUTHBEARER and handler in JWT_CALLBACK_HANDLERS):
            raise ConfigError(f"{handler_key}={handler} is not supported by kbroker: it runs Kafka's own callback "
                              f"handlers only (for OAUTHBEARER: {JWT_CALLBACK_HANDLERS[0]})")
        if mechanism == OAUTHBEARER:
            if _login_callback_handler(config, self.listener_name) is None:
                # Kafka's broker logs in on every OAUTHBEARER listener at start with the default
                # (unsecured) login handler, and stops when the options make no token.
                _unsecured_login(module)
            validate: TokenValidator
            if handler:
                settings = _jwt_settings(config, self.listener_name)
                validate = JwtValidator(settings, JwksSource(settings, self._clock_ms), self._clock_ms)
            else:
                validate = UnsecuredValidator(module.options, self._clock_ms)
            return lambda: OAuthBearerServer(validate)
        if mechanism == PLAIN:
            return lambda: PlainServer.from_jaas(module)
        if mechanism in HASHES:
            scram = self._scram
            lookup = scram.lookup if scram is not None else _no_credentials
            return lambda: ScramServer(mechanism, lookup)
        raise ConfigError(f"SASL mechanism {mechanism} is not supported by kbroker yet")

    def create(self, mechanism: str) -> SaslServer:
        """A server for one exchange; ValueError for a mechanism this listener does not enable
        (the handshake's UNSUPPORTED_SASL_MECHANISM)."""
        builder = self._builders.get(mechanism)
        if builder is None:
            raise ValueError(f"Unsupported SASL mechanism {mechanism}")
        return builder()


def client_for(config: KafkaConfig, listener_name: str, mechanism: str) -> SaslClient:
    """The broker's own client on the inter-broker (or controller) listener: it logs in with the
    ``username`` / ``password`` options of the listener's login module, as Kafka's broker does."""
    module = server_login_module(config, listener_name, mechanism)
    if mechanism == PLAIN:
        return PlainClient.from_jaas(module)
    if mechanism in HASHES:
        return ScramClient.from_jaas(mechanism, module)
    if mechanism == OAUTHBEARER:
        handler = _login_callback_handler(config, listener_name)
        if handler is not None:
            raise ConfigError(f"{handler[0]}={handler[1]} is not supported by kbroker's inter-broker client: it logs "
                              "in with Kafka's unsecured tokens only")
        return _unsecured_login(module)
    raise ConfigError(f"SASL mechanism {mechanism} is not supported by kbroker's inter-broker client")


def _login_callback_handler(config: KafkaConfig, listener_name: str) -> tuple[str, str] | None:
    """The (key, class) of a login callback handler set for OAUTHBEARER on the listener."""
    key = f"{OAUTHBEARER.lower()}.{LOGIN_CALLBACK_HANDLER}"
    found_key, value = _first(config, _listener_key(listener_name, key), key)
    return (found_key, value) if value else None


def _unsecured_login(module: JaasLoginModule) -> OAuthBearerClient:
    try:
        return OAuthBearerClient.from_jaas(module)
    except ValueError as exc:
        raise ConfigError(f"{module.key}: {exc}") from None


def _jwt_settings(config: KafkaConfig, listener_name: str) -> JwtSettings:
    def value(key: str) -> str | None:
        full = f"sasl.oauthbearer.{key}"
        return _first(config, _listener_key(listener_name, f"oauthbearer.{full}"), _listener_key(listener_name, full),
                      full)[1]

    url = value("jwks.endpoint.url")
    if not url:
        raise ConfigError(f"OAUTHBEARER token validation on listener {listener_name} needs "
                          "sasl.oauthbearer.jwks.endpoint.url (a file:// or https:// JWKS)")
    try:
        return JwtSettings(
            jwks_url=url,
            expected_audience=[a.strip() for a in (value("expected.audience") or "").split(",") if a.strip()],
            expected_issuer=value("expected.issuer") or None,
            sub_claim_name=value("sub.claim.name") or "sub",
            scope_claim_name=value("scope.claim.name") or "scope",
            clock_skew_seconds=int(value("clock.skew.seconds") or 30),
            refresh_ms=int(value("jwks.endpoint.refresh.ms") or 3_600_000),
            retry_backoff_ms=int(value("jwks.endpoint.retry.backoff.ms") or 100),
        )
    except ValueError as exc:
        raise ConfigError(f"a sasl.oauthbearer.* number on listener {listener_name}: {exc}") from None
