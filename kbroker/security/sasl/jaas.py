"""Kafka's JAAS login configuration as a ``sasl.jaas.config`` value: parsing and where a broker
finds it.

Syntax (Kafka's, after Java's JAAS file format): ``<LoginModule class> <flag> [key=value ...];``
with the flag one of required, requisite, sufficient, optional; a value is a word or a quoted
string (``"..."`` or ``'...'``, backslash escapes); ``//`` and ``/* */`` are comments. A broker
reads the login module of a mechanism on a listener from
``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (listener and mechanism in lower case),
else ``<mechanism>.sasl.jaas.config``; as Kafka, it ignores a bare ``sasl.jaas.config`` (with
Kafka's warning). Deviation: the static JAAS file (``java.security.auth.login.config``) is not
read. Errors name the key, never the value: it holds passwords.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from kbroker.config.kafka_config import ConfigError, KafkaConfig

log = logging.getLogger(__name__)

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
SASL_JAAS_CONFIG = "sasl.jaas.config"


class JaasConfigError(ConfigError):
    """A ``sasl.jaas.config`` value that does not parse, or a mechanism without one."""


@dataclass(frozen=True, slots=True)
class JaasLoginModule:
    """One login module entry; ``options`` are secrets (passwords), so repr leaves them out."""

    login_module: str
    control_flag: str
    options: Mapping[str, str] = field(repr=False)
    key: str = ""  # the config key it was read from, for messages


def parse_jaas_config(text: str) -> list[JaasLoginModule]:
    """The login modules of a JAAS config value (ValueError with Kafka's reason when malformed)."""
    tokens = _Tokens(text)
    modules: list[JaasLoginModule] = []
    while (token := tokens.next()) is not None:
        login_module = _word(token)
        if login_module is None:
            raise ValueError("Login module not specified in JAAS config")
        flag_token = tokens.next()
        if flag_token is None:
            raise ValueError("Login module control flag not specified in JAAS config")
        flag = (_word(flag_token) or "").lower()
        if flag not in CONTROL_FLAGS:
            raise ValueError(f"Invalid login module control flag '{_word(flag_token)}' in JAAS config")
        options: dict[str, str] = {}
        while (token := tokens.next()) is not None and token != (";", False):
            key = _word(token)
            if tokens.next() != ("=", False) or (value := tokens.next()) is None or _word(value) is None:
                raise ValueError(f"Value not specified for key '{key}' in JAAS config")
            options[key or ""] = _word(value) or ""
        if token is None:
            raise ValueError("JAAS config entry not terminated by semi-colon")
        modules.append(JaasLoginModule(login_module, flag, options))
    return modules


def parse_single_module(text: str, key: str) -> JaasLoginModule:
    """The one login module a ``sasl.jaas.config`` value must hold (Kafka refuses more or none)."""
    try:
        modules = parse_jaas_config(text)
    except ValueError as exc:
        raise JaasConfigError(f"Invalid value [hidden] for configuration {key}: {exc}") from None
    if len(modules) != 1:
        raise JaasConfigError(f"Invalid value [hidden] for configuration {key}: JAAS config property contains "
                              f"{len(modules)} login modules, should be 1 module")
    module = modules[0]
    return JaasLoginModule(module.login_module, module.control_flag, module.options, key)


def server_jaas_keys(listener_name: str, mechanism: str) -> tuple[str, str]:
    """Where a broker looks for a mechanism's login module on a listener, first wins."""
    mechanism_key = f"{mechanism.lower()}.{SASL_JAAS_CONFIG}"
    return f"listener.name.{listener_name.lower()}.{mechanism_key}", mechanism_key


def server_login_module(config: KafkaConfig, listener_name: str, mechanism: str) -> JaasLoginModule:
    """The login module of ``mechanism`` on ``listener_name`` (also what the broker's own client
    logs in with on the inter-broker listener, as Kafka's does); JaasConfigError without one."""
    keys = server_jaas_keys(listener_name, mechanism)
    for key in keys:
        value = config.get(key)
        if value is not None:
            return parse_single_module(value, key)
    if config.get(SASL_JAAS_CONFIG) is not None:
        log.warning("Server config %s should be prefixed with SASL mechanism name, ignoring config", SASL_JAAS_CONFIG)
    # Kafka's words (it would look in a static JAAS file next, which kbroker does not read).
    raise JaasConfigError(
        f"Could not find a 'KafkaServer' or '{listener_name.lower()}.KafkaServer' entry in the JAAS configuration "
        f"for SASL mechanism {mechanism}: set {keys[0]}")


Token = tuple[str, bool]  # (text, quoted); an unquoted single character is punctuation or a word


class _Tokens:
    """Java's StreamTokenizer as Kafka sets it up for JAAS: words of letters, digits and
    ``._-$``, quoted strings with escapes, comments skipped, any other character on its own.
    A bare number is a token without a string value (so not a value, as in Kafka)."""

    _WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-$")
    _ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def next(self) -> Token | None:
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch <= " ":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                self.pos = len(text) if end < 0 else end + 2
            else:
                break
        if self.pos >= len(text):
            return None
        ch = text[self.pos]
        if ch in "\"'":
            return self._quoted(ch), True
        if ch in self._WORD or ch >= "\u00a0":
            start = self.pos
            while self.pos < len(text) and (text[self.pos] in self._WORD or text[self.pos] >= "\u00a0"):
                self.pos += 1
            return text[start:self.pos], False
        self.pos += 1
        return ch, False

    def _quoted(self, quote: str) -> str:
        out = []
        self.pos += 1
        text = self.text
        while self.pos < len(text) and text[self.pos] != quote and text[self.pos] not in "\r\n":
            ch = text[self.pos]
            if ch == "\\" and self.pos + 1 < len(text):
                self.pos += 1
                ch = self._ESCAPES.get(text[self.pos], text[self.pos])
            out.append(ch)
            self.pos += 1
        self.pos += 1  # the closing quote (or the line end that ends an unclosed string, as Java's)
        return "".join(out)


def _word(token: Token) -> str | None:
    text, quoted = token
    if quoted or (text and (text[0] in _Tokens._WORD or text[0] >= "\u00a0") and not _is_number(text)):
        return text
    return None


def _is_number(text: str) -> bool:
    """StreamTokenizer reads a token starting with a digit or '.' as a number, which has no string value."""
    return text[0].isdigit() or text[0] == "."
