"""The container image's configuration: ``KAFKA_*`` environment variables, a mounted
``server.properties`` and the image's defaults, merged into one set of broker settings.

The environment is read as the ``apache/kafka`` image reads it: ``KAFKA_FOO_BAR`` sets
``foo.bar``; after the prefix is dropped and the name lower-cased, ``_`` becomes ``.``, then
``...`` (from ``___``) becomes ``-`` and ``..`` (from ``__``) becomes ``_``. Variables that
image reserves for the JVM and log4j (``KAFKA_HEAP_OPTS``, ``KAFKA_OPTS``, ...) are not broker
keys and are skipped.

Unlike that image, whose defaults apply only when no variable is set at all, every default here
is filled in key by key, after the mounted file and the environment: ``KAFKA_NUM_PARTITIONS=5``
alone changes one key of the single node that ``docker run -p 9092:9092`` starts. Defaults that
depend on other keys (listeners, advertised listeners, the quorum voters) are derived from what
was given, so ``KAFKA_NODE_ID`` / ``KAFKA_PROCESS_ROLES`` / ``KAFKA_CONTROLLER_QUORUM_VOTERS``
(plus ``KAFKA_ADVERTISED_LISTENERS`` for a broker) are enough for any role of a cluster.
Precedence, highest first: environment, mounted file, derived defaults.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kbroker.config.kafka_config import BROKER_CONFIGS, ConfigError, parse_listeners, parse_properties

ENV_PREFIX = "KAFKA_"
# Read by the apache/kafka image's scripts for the JVM, JMX and log4j, never as broker keys.
NOT_BROKER_KEYS = frozenset({
    "KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME", "KAFKA_JMX_PORT",
    "KAFKA_CLUSTER_ID",  # the cluster id (read by ``kbroker serve``), not a broker key
})
# What Kubernetes injects into every pod for a Service named "kafka" (service links: KAFKA_PORT=
# tcp://10.0.0.7:9092, KAFKA_PORT_9092_TCP_ADDR, KAFKA_SERVICE_HOST, KAFKA_SERVICE_PORT_CLIENT...):
# addresses of the Service, never broker keys (Kafka 4 has no "port" key).
SERVICE_LINK = re.compile(r"KAFKA_(PORT(_\d+_(TCP|UDP|SCTP)(_(ADDR|PORT|PROTO))?)?|SERVICE_(HOST|PORT(_\w+)?))")
LOG_LEVEL_ENV = "KAFKA_LOG4J_ROOT_LOGLEVEL"

DATA_DIR = "/var/lib/kbroker/data"
MOUNTED_PROPERTIES = "/mnt/shared/config/server.properties"
# The merged settings the node started with, on the data volume (kept for `kbroker healthcheck`
# and for a person asking what ran).
FINAL_PROPERTIES = "/var/lib/kbroker/server.properties"
CLIENT_LISTENER = "PLAINTEXT"
CONTROLLER_LISTENER = "CONTROLLER"
CLIENT_PORT = 9092
CONTROLLER_PORT = 9093
HTTP_PORT = 8080
WILDCARD = "0.0.0.0"
# What a client on the host of `docker run -p 9092:9092` dials.
ADVERTISED_HOST = "localhost"

# Defaults that do not depend on other keys. A new consumer group need not wait 3 s for more
# members on a development node (the apache/kafka image sets the same).
STATIC_DEFAULTS: dict[str, str] = {
    "node.id": "1",
    "process.roles": "broker,controller",
    "controller.listener.names": CONTROLLER_LISTENER,
    "log.dirs": DATA_DIR,
    "group.initial.rebalance.delay.ms": "0",
    # /metrics, /health/live, /health/ready and the console (`docker run -p 8080:8080`);
    # KAFKA_KBROKER_HTTP_LISTENERS= (empty) turns it off.
    "kbroker.http.listeners": f"http://{WILDCARD}:{HTTP_PORT}",
}

SINGLE_NODE_INTERNAL_TOPICS: dict[str, str] = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}

_LOG4J_TO_PYTHON = {"TRACE": "DEBUG", "DEBUG": "DEBUG", "INFO": "INFO", "WARN": "WARNING",
                    "ERROR": "ERROR", "FATAL": "CRITICAL", "OFF": "CRITICAL"}


def property_name(env_name: str) -> str:
    """The broker key an environment variable sets: ``KAFKA_LOG_RETENTION_MS`` -> ``log.retention.ms``,
    ``KAFKA_A__B`` -> ``a_b``, ``KAFKA_A___B`` -> ``a-b``."""
    if not env_name.startswith(ENV_PREFIX):
        raise ValueError(f"{env_name} does not start with {ENV_PREFIX}")
    dotted = env_name[len(ENV_PREFIX):].lower().replace("_", ".")
    return dotted.replace("...", "-").replace("..", "_")


def settings_from_env(environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """``{key: (value, variable)}`` for every ``KAFKA_*`` variable that names a broker key."""
    out: dict[str, tuple[str, str]] = {}
    for name in sorted(environ):
        if name.startswith(ENV_PREFIX) and name not in NOT_BROKER_KEYS and not SERVICE_LINK.fullmatch(name):
            out[property_name(name)] = (environ[name], name)
    return out


def log_level(environ: Mapping[str, str]) -> str:
    """The Python log level for ``KAFKA_LOG4J_ROOT_LOGLEVEL`` (log4j's names), INFO when unset."""
    raw = environ.get(LOG_LEVEL_ENV, "").strip().upper()
    if not raw:
        return "INFO"
    if raw not in _LOG4J_TO_PYTHON:
        raise ConfigError(f"{LOG_LEVEL_ENV}={raw}: expected one of {', '.join(_LOG4J_TO_PYTHON)}")
    return _LOG4J_TO_PYTHON[raw]


@dataclass
class ContainerSettings:
    """The merged settings in order, each with where it came from (a variable, the file, or
    "image default")."""

    values: dict[str, str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)

    def set(self, key: str, value: str, origin: str) -> None:
        self.values[key] = value
        self.origins[key] = origin

    def properties_text(self) -> str:
        """A ``server.properties`` with a comment above each key naming its origin."""
        return "".join(f"# {self.origins[k]}\n{k}={_escape(v)}\n" for k, v in self.values.items())


def _escape(value: str) -> str:
    """Java-properties escaping of a value's backslashes and line breaks."""
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def merge(environ: Mapping[str, str], mounted_text: str | None = None,
          mounted_name: str = MOUNTED_PROPERTIES) -> ContainerSettings:
    """The settings a container starts with (see the module docstring for the precedence)."""
    given = ContainerSettings()
    if mounted_text is not None:
        for line, key, value in parse_properties(mounted_text):
            given.set(key, value, f"{mounted_name}:{line}")
    for key, (value, variable) in settings_from_env(environ).items():
        if key not in BROKER_CONFIGS:
            raise ConfigError(f"unknown configuration key '{key}' (from environment variable {variable})")
        given.set(key, value, f"environment variable {variable}")
    merged = ContainerSettings()
    for key, value in derived_defaults(given.values).items():
        if key not in given.values:
            merged.set(key, value, "image default")
    for key, value in given.values.items():
        merged.set(key, value, given.origins[key])
    return merged


def derived_defaults(given: Mapping[str, str]) -> dict[str, str]:
    """The image's default for every key it defaults, computed from the keys already ``given``."""
    defaults = dict(STATIC_DEFAULTS)
    node_id = given.get("node.id", defaults["node.id"])
    roles = {r.strip() for r in given.get("process.roles", defaults["process.roles"]).split(",") if r.strip()}
    controller_name = given.get("controller.listener.names", CONTROLLER_LISTENER).split(",")[0].strip().upper()
    voters = given.get("controller.quorum.voters")
    if voters is None:
        if roles != {"broker", "controller"}:
            raise ConfigError(
                f"process.roles={','.join(sorted(roles))} needs the quorum's voters: set "
                "KAFKA_CONTROLLER_QUORUM_VOTERS (id@host:port,...)"
            )
        voters = f"{node_id}@{ADVERTISED_HOST}:{CONTROLLER_PORT}"
        defaults["controller.quorum.voters"] = voters
    controller_port = _own_voter_port(voters, node_id)
    if "broker" in roles and _voter_ids(voters) == [node_id.strip()]:
        # One node is the whole cluster: its internal topics get one replica, as in the
        # apache/kafka image's server.properties (Kafka's defaults of 3 would leave consumer
        # groups and transactions waiting for brokers that never come).
        defaults.update(SINGLE_NODE_INTERNAL_TOPICS)

    listeners = given.get("listeners")
    if listeners is None:
        client: list[str] = []
        if "broker" in roles:
            advertised = given.get("advertised.listeners")
            client = ([f"{name}://{WILDCARD}:{port}" for name, _host, port in
                       parse_listeners(advertised, "advertised.listeners") if name != controller_name]
                      if advertised else [f"{CLIENT_LISTENER}://{WILDCARD}:{CLIENT_PORT}"])
        controller = [f"{controller_name}://{WILDCARD}:{controller_port}"] if "controller" in roles else []
        listeners = ",".join(client + controller)
        defaults["listeners"] = listeners
    if "broker" in roles and "advertised.listeners" not in given:
        # Every wildcard or empty host becomes the name the host's clients use for the mapped port.
        defaults["advertised.listeners"] = ",".join(
            f"{name}://{host if host not in ('', WILDCARD, '::') else ADVERTISED_HOST}:{port}"
            for name, host, port in parse_listeners(listeners, "listeners") if name != controller_name
        )
    return defaults


def _voter_ids(voters: str) -> list[str]:
    return [item.strip().partition("@")[0].strip() for item in voters.split(",") if item.strip()]


def _own_voter_port(voters: str, node_id: str) -> int:
    """This node's port in ``controller.quorum.voters``, or the image's controller port."""
    for item in voters.split(","):
        voter, _at, address = item.strip().partition("@")
        if voter.strip() == node_id.strip():
            port = address.rpartition(":")[2]
            if port.isdigit():
                return int(port)
    return CONTROLLER_PORT
