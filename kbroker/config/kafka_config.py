"""Broker configuration: Kafka's server.properties keys, defaults, parsing and validation.

``KafkaConfig.load`` reads a Java-properties file, applies ``--override key=value`` on top,
and checks each value as Kafka 4.3.1 does (``broker_catalogue``: every key Kafka's broker and
controller define, with Kafka's messages), naming the key and its source (file and line, or
``--override``). Keys that Kafka has but kbroker does not act on are accepted (so a real Kafka
``server.properties`` starts) and listed once at start-up as not acted on yet. A key Kafka does
not define either is accepted as Kafka accepts it (plugins read keys of their own) and named at
start-up with its source as a warning, since it is most likely a typo.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from kbroker.config.broker_catalogue import BROKER_CONFIGS, InvalidValue, check_value
from kbroker.http.listeners import HTTP_LISTENERS_KEY, parse_http_listeners
from kbroker.network.connection_quotas import parse_per_ip_overrides
from kbroker.security.authorizer import AUTHORIZER_KEYS
from kbroker.storage.log_config import ConfigSource


class ConfigError(Exception):
    """A bad broker configuration; the CLI prints it and exits with status 2."""


# Where kbroker's defaults differ from Kafka's: a zero-configuration single node on localhost
# (Kafka requires node.id and process.roles, and listens on every interface by default).
KBROKER_DEFAULTS = {
    "listeners": "PLAINTEXT://localhost:9092",
    "log.dir": "./kbroker-data",
    "node.id": "1",
    "process.roles": "broker,controller",
}
# Per-listener keys (``listener.name.<listener>.<key>``) configure a listener's security and
# plugins, overriding ``<key>``; Kafka accepts them outside its ConfigDef, and so does kbroker.
LISTENER_PREFIX = "listener.name."
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_properties(text: str) -> list[tuple[int, str, str]]:
    """Java-properties lines as (line number, key, value); handles comments and continuations."""
    out: list[tuple[int, str, str]] = []
    logical = ""
    start_line = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip() if not logical else raw.lstrip()
        if not logical:
            if not line or line[0] in "#!":
                continue
            start_line = number
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        for i, ch in enumerate(logical):
            if ch in "=:":
                key, value = logical[:i].strip(), logical[i + 1 :].strip()
                break
            if ch.isspace():
                rest = logical[i:].lstrip()
                if rest[:1] in ("=", ":"):
                    rest = rest[1:]
                key, value = logical[:i].strip(), rest.strip()
                break
        else:
            key, value = logical.strip(), ""
        out.append((start_line, key, value))
        logical = ""
    return out


# A node started without ``process.roles`` (kbroker's zero-configuration single node; Kafka
# requires the key) is a combined broker and controller, its own only voter, reached in process.
# Its internal topics then default to what Kafka's single-node quickstart server.properties sets,
# since Kafka's defaults (3, 3, 2) can never be met by one broker.
SINGLE_NODE_DEFAULTS = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


class KafkaConfig:
    """Resolved broker settings; ``layers(key)`` answers DescribeConfigs-style lookups."""

    def __init__(self, explicit: dict[str, str], sources: dict[str, str]) -> None:
        self.explicit = explicit
        self.sources = sources

    @classmethod
    def load(cls, path: str | None = None, overrides: Iterable[str] = ()) -> KafkaConfig:
        values: dict[str, str] = {}
        sources: dict[str, str] = {}
        if path is not None:
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
            for line, key, value in parse_properties(text):
                values[key] = value
                sources[key] = f"{path}:{line}"
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--override {item!r}: expected key=value")
            values[key.strip()] = value.strip()
            sources[key.strip()] = "--override"
        for key, value in values.items():
            _validate(key, value, sources[key])
        config = cls(values, sources)
        config._validate_socket_server()
        config._validate_listener_security()
        return config

    def get(self, key: str) -> str | None:
        if key in self.explicit:
            return self.explicit[key]
        return self._default(key)

    def _default(self, key: str) -> str | None:
        if self.implicit_single_node and key in SINGLE_NODE_DEFAULTS:
            return SINGLE_NODE_DEFAULTS[key]
        if key in KBROKER_DEFAULTS:
            return KBROKER_DEFAULTS[key]
        definition = BROKER_CONFIGS.get(key)
        return definition.default if definition is not None else None

    def get_int(self, key: str) -> int:
        return int(self.get(key) or 0)

    def get_bool(self, key: str) -> bool:
        return (self.get(key) or "false").lower() == "true"

    def layers(self, key: str) -> list[tuple[str, ConfigSource]]:
        """The static value (server.properties / --override) and the built-in default, if any.
        ``broker.id`` is static with node.id's value when not set, as Kafka copies node.id to it."""
        out: list[tuple[str, ConfigSource]] = []
        if key in self.explicit:
            out.append((self.explicit[key], ConfigSource.STATIC_BROKER_CONFIG))
        elif key == "broker.id":
            out.append((str(self.node_id), ConfigSource.STATIC_BROKER_CONFIG))
        # A key Kafka requires (node.id, process.roles, ...) has no default layer once it is set.
        definition = BROKER_CONFIGS.get(key)
        required_and_set = definition is not None and definition.required and key in self.explicit
        default = self._default(key) if definition is not None and not required_and_set else None
        if default is not None:
            out.append((default, ConfigSource.DEFAULT_CONFIG))
        return out

    @property
    def node_id(self) -> int:
        node_id = self.get_int("node.id")
        if "node.id" not in self.explicit and "broker.id" in self.explicit:
            node_id = self.get_int("broker.id")
        return node_id

    @property
    def log_dirs(self) -> list[str]:
        raw = self.get("log.dirs") or self.get("log.dir") or "./kbroker-data"
        return [os.path.abspath(d.strip()) for d in raw.split(",") if d.strip()]

    @property
    def listeners(self) -> list[tuple[str, str, int]]:
        return parse_listeners(self.get("listeners") or "", "listeners")

    @property
    def advertised_listeners(self) -> list[tuple[str, str, int]]:
        raw = self.get("advertised.listeners")
        return parse_listeners(raw, "advertised.listeners") if raw else self.listeners

    @property
    def controller_listener_names(self) -> set[str]:
        return {n.strip().upper() for n in (self.get("controller.listener.names") or "").split(",") if n.strip()}

    @property
    def quorum_voters(self) -> list[tuple[int, str, int]]:
        """``controller.quorum.voters`` as (node id, host, port). Unset: this node alone, with no
        address (host "", port 0): its broker reaches its controller in process."""
        out = []
        for item in (part.strip() for part in (self.get("controller.quorum.voters") or "").split(",")):
            if item:
                node, _at, address = item.partition("@")
                host, _colon, port = address.rpartition(":")
                out.append((int(node), host.strip("[]"), int(port)))
        return out or [(self.node_id, "", 0)]

    @property
    def implicit_single_node(self) -> bool:
        """No ``process.roles``: kbroker's zero-configuration single node (see SINGLE_NODE_DEFAULTS)."""
        return "process.roles" not in self.explicit

    @property
    def process_roles(self) -> set[str]:
        """``process.roles`` (default both: a single node)."""
        return {r.strip() for r in (self.get("process.roles") or "").split(",") if r.strip()}

    def _validate_socket_server(self) -> None:
        """Kafka's start-up checks across the socket server's keys."""
        queued, request_max = self.get_int("queued.max.request.bytes"), self.get_int("socket.request.max.bytes")
        if 0 < queued < request_max:
            raise ConfigError(
                f"queued.max.request.bytes ({queued}, from {self.sources['queued.max.request.bytes']}) must be "
                f"larger or equal to socket.request.max.bytes ({request_max}) when it is positive"
            )
        if self.get_int("max.connections.per.ip") == 0 and not (self.get("max.connections.per.ip.overrides") or ""):
            raise ConfigError(
                f"max.connections.per.ip can be 0 (from {self.sources['max.connections.per.ip']}) only if "
                "max.connections.per.ip.overrides is set"
            )

    def listener_value(self, listener: str, key: str) -> tuple[str, str | None]:
        """A per-listener key: ``listener.name.<listener>.<key>`` when set, else ``key`` (set or
        its default); returns the key the value came from, and the value."""
        prefixed = f"{LISTENER_PREFIX}{listener.lower()}.{key}"
        if prefixed in self.explicit:
            return prefixed, self.explicit[prefixed]
        return key, self.get(key)

    @property
    def security_protocol_map(self) -> dict[str, str]:
        """``listener.security.protocol.map`` as Kafka makes it effective: on a KRaft node whose
        map is not set and whose listeners use neither SSL nor SASL, the controller listeners
        missing from the default map are PLAINTEXT."""
        raw = self.get("listener.security.protocol.map") or ""
        mapping: dict[str, str] = {}
        for item in (part.strip() for part in raw.split(",")):
            if not item:
                continue
            name, sep, protocol = item.partition(":")
            if not sep or not name.strip():
                raise ConfigError(f"Invalid value {raw} for configuration listener.security.protocol.map: "
                                  f"Map entry '{item}' is not of the form 'name:protocol'")
            if protocol.strip().upper() not in SECURITY_PROTOCOLS:
                raise ConfigError(f"Invalid security protocol `{protocol.strip()}` defined in "
                                  "listener.security.protocol.map")
            mapping[name.strip().upper()] = protocol.strip().upper()
        if "listener.security.protocol.map" not in self.explicit:
            secured = {"SSL", "SASL_SSL", "SASL_PLAINTEXT"}
            names = self.controller_listener_names | {name for name, _host, _port in self.listeners}
            if not names & secured:
                mapping.update((name, "PLAINTEXT") for name in self.controller_listener_names if name not in mapping)
        return mapping

    def security_protocol(self, listener: str) -> str:
        """The security protocol of a listener name (ConfigError, as Kafka's, if it has none)."""
        protocol = self.security_protocol_map.get(listener.upper())
        if protocol is None:
            raise ConfigError(f"Error creating broker listeners from '{self.get('listeners')}': "
                              f"No security protocol defined for listener {listener.upper()}")
        return protocol

    @property
    def inter_broker_listener_name(self) -> str:
        """``inter.broker.listener.name``, else the listener named like ``security.inter.broker.protocol``."""
        name = self.get("inter.broker.listener.name")
        return (name or self.get("security.inter.broker.protocol") or "PLAINTEXT").strip().upper()

    def _validate_listener_security(self) -> None:
        """Kafka's start-up checks of listener names against their security protocols."""
        if "inter.broker.listener.name" in self.explicit and "security.inter.broker.protocol" in self.explicit:
            raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol "
                              "should be set.")
        mapping = self.security_protocol_map
        for key in ("listeners", "advertised.listeners"):
            for name, _host, _port in parse_listeners(self.get(key) or "", key) if self.get(key) else ():
                if name not in mapping:
                    raise ConfigError(f"Error creating broker listeners from '{self.get(key)}': "
                                      f"No security protocol defined for listener {name}")
        if "inter.broker.listener.name" in self.explicit and self.inter_broker_listener_name not in mapping:
            raise ConfigError(f"Listener with name {self.inter_broker_listener_name} defined in "
                              "inter.broker.listener.name not found in listener.security.protocol.map.")
        if "broker" not in self.process_roles:
            return
        protocol = mapping.get(self.inter_broker_listener_name, "")
        if protocol.startswith("SASL_"):
            mechanism = self.get("sasl.mechanism.inter.broker.protocol") or ""
            _key, enabled = self.listener_value(self.inter_broker_listener_name, "sasl.enabled.mechanisms")
            if mechanism not in [m.strip() for m in (enabled or "").split(",")]:
                raise ConfigError("requirement failed: sasl.mechanism.inter.broker.protocol must be included in "
                                  "sasl.enabled.mechanisms when SASL is used for inter-broker communication")

    def ignored_keys(self) -> list[str]:
        """The Kafka keys set here that kbroker accepts but does not act on yet."""
        return sorted(k for k in self.explicit if not _acted_on(k))

    def unknown_keys(self) -> list[str]:
        """The keys set here that Kafka 4.3.1 does not define, each with where it was set."""
        return sorted(f"{k} (from {self.sources[k]})" for k in self.explicit
                      if k not in BROKER_CONFIGS and k not in AUTHORIZER_KEYS and not k.startswith(LISTENER_PREFIX))


def _acted_on(key: str) -> bool:
    """Whether kbroker acts on a key set in the configuration; a per-listener key
    (``listener.name.<l>.<key>``, or ``listener.name.<l>.<mechanism>.<key>``) as its ``<key>``."""
    if key.startswith(LISTENER_PREFIX):
        rest = key[len(LISTENER_PREFIX):].partition(".")[2]
        candidates = (rest, rest.partition(".")[2])
        return any(c in BROKER_CONFIGS and BROKER_CONFIGS[c].acted_on for c in candidates)
    return key not in BROKER_CONFIGS or BROKER_CONFIGS[key].acted_on


def parse_listeners(raw: str, key: str) -> list[tuple[str, str, int]]:
    """``NAME://host:port,...`` as (name, host, port); an empty host means all interfaces."""
    out = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ConfigError(f"Invalid value {item} for configuration {key}: expected NAME://host:port")
        out.append((name.upper(), host.strip("[]"), int(port)))
    if not out:
        raise ConfigError(f"Invalid value {raw!r} for configuration {key}: no listener given")
    return out


def _validate(key: str, value: str, source: str) -> None:
    """Kafka's ConfigDef checks (type, range, valid values), with Kafka's message and the source;
    then kbroker's checks of the values it parses further."""
    definition = BROKER_CONFIGS.get(key)
    if definition is None:
        return  # unknown_keys() names it at start-up
    try:
        check_value(definition, value)
    except InvalidValue as exc:
        raise ConfigError(f"{exc} (from {source})") from None
    if key == "max.connections.per.ip.overrides":
        try:
            parse_per_ip_overrides(value)
        except ValueError as exc:
            raise ConfigError(
                f"invalid value '{value}' for configuration key '{key}' (from {source}): {exc}"
            ) from None
    if key == HTTP_LISTENERS_KEY:
        try:
            parse_http_listeners(value)
        except ValueError as exc:
            raise ConfigError(f"{exc} (from {source})") from None
    if key in ("listeners", "advertised.listeners"):
        try:
            parse_listeners(value, key)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (from {source})") from None
