"""SCRAM users given at start, as ``kafka-storage format --add-scram`` gives them:
``SCRAM-SHA-256=[name=alice,password=alice-secret]`` (optional ``iterations``, default 4096,
within [4096, 16384]; ``salt`` in base64, else a random one; or ``saltedpassword`` in base64
with ``salt`` instead of ``password``). Each becomes a UserScramCredentialRecord that a new
cluster's first active controller writes with its first records. Errors are Kafka's words but
never repeat a password.
"""

from __future__ import annotations

import base64
import binascii
import secrets

from kbroker.config.kafka_config import ConfigError
from kbroker.replication.quorum.metadata_records import UserScramCredentialRecord
from kbroker.replication.quorum.scram_control_manager import MAX_ITERATIONS, MIN_ITERATIONS, credential_record
from kbroker.security.sasl.scram import salted_password
from kbroker.security.scram_credentials import SCRAM_MECHANISM_CODES

DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32  # Kafka's secureRandomBytes for a salt


def parse_add_scram(argument: str) -> UserScramCredentialRecord:
    """One ``--add-scram`` argument as the credential record it stands for (ConfigError)."""
    mechanism, sep, config = argument.strip().partition("=")
    if not sep:
        raise ConfigError("--add-scram: Failed to find equals sign in SCRAM argument")
    if mechanism not in SCRAM_MECHANISM_CODES:
        raise ConfigError(f"--add-scram: The add-scram mechanism {mechanism} is not supported.")
    if not config.startswith("["):
        raise ConfigError("--add-scram: Expected configuration string to start with [")
    if not config.endswith("]"):
        raise ConfigError("--add-scram: Expected configuration string to end with ]")
    components: dict[str, str] = {}
    for component in config[1:-1].split(","):
        key, sep, value = component.partition("=")
        if not sep:
            raise ConfigError(f"--add-scram: No equals sign found in SCRAM component: {key}")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        components[key] = value
    name = components.pop("name", None)
    if name is None:
        raise ConfigError("--add-scram: You must supply 'name' to add-scram")
    salt = _base64(components.pop("salt", None), "salt")
    iterations_text = components.pop("iterations", None)
    try:
        iterations = int(iterations_text) if iterations_text is not None else DEFAULT_ITERATIONS
    except ValueError:
        raise ConfigError(f"--add-scram: Failed to parse iterations count: {iterations_text}") from None
    password = components.pop("password", None)
    salted = _base64(components.pop("saltedpassword", None), "saltedPassword")
    if password is None and salted is None:
        raise ConfigError("--add-scram: You must supply one of 'password' or 'saltedpassword' to add-scram")
    if password is None and salt is None:
        raise ConfigError("--add-scram: You must supply 'salt' with 'saltedpassword' to add-scram")
    if components:
        raise ConfigError(f"--add-scram: Unknown SCRAM configurations: {', '.join(sorted(components))}")
    if iterations < MIN_ITERATIONS:
        raise ConfigError(f"--add-scram: The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram "
                          f"using {mechanism}")
    if iterations > MAX_ITERATIONS:
        raise ConfigError(f"--add-scram: The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram "
                          f"using {mechanism}")
    salt = salt if salt is not None else secrets.token_bytes(SALT_BYTES)
    if password is not None:
        salted = salted_password(mechanism, password, salt, iterations)
    assert salted is not None
    return credential_record(name, SCRAM_MECHANISM_CODES[mechanism], salt, salted, iterations)


def _base64(text: str | None, what: str) -> bytes | None:
    if text is None:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise ConfigError(f"--add-scram: Failed to decode given {what}") from None
