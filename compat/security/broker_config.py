"""The secured ``server.properties`` both brokers of a security compat run start from, and the
client-side description of each way in.

One combined node (broker and controller) with these listeners, each on its own loopback port:

| listener | security protocol | what it is for |
|---|---|---|
| PLAINTEXT | PLAINTEXT | set-up (topics, SCRAM users) and the inter-broker listener |
| SSL | SSL | TLS, client certificate requested (``ssl.client.auth=requested``) |
| MTLS | SSL | TLS with ``listener.name.mtls.ssl.client.auth=required`` |
| SASL_PLAINTEXT | SASL_PLAINTEXT | PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (unsecured JWS) |
| SASL_SSL | SASL_SSL | the same mechanisms over TLS |
| PLAIN_ONLY | SASL_PLAINTEXT | ``listener.name.plain_only.sasl.enabled.mechanisms=PLAIN`` |
| CONTROLLER | PLAINTEXT | the KRaft controller |

Every key is Kafka's; Kafka 4.3.1 and kbroker get the same text, only ports and directories
differ. PLAIN users are the JAAS ``user_<name>`` options; SCRAM users are created after start
with AlterUserScramCredentials (the same request on both brokers).
"""

from __future__ import annotations

from compat.security.certificates import Certificates
from compat.security.client_security import LOGIN_MODULES

HOST = "127.0.0.1"
# Listener name -> security protocol (``listener.security.protocol.map``), CONTROLLER last.
LISTENERS: dict[str, str] = {
    "PLAINTEXT": "PLAINTEXT",
    "SSL": "SSL",
    "MTLS": "SSL",
    "SASL_PLAINTEXT": "SASL_PLAINTEXT",
    "SASL_SSL": "SASL_SSL",
    "PLAIN_ONLY": "SASL_PLAINTEXT",
}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# name -> password: PLAIN users in the JAAS text, SCRAM users made after start.
USERS: dict[str, str] = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_ITERATIONS = 4096



def broker_jaas(mechanism: str) -> str:
    """The broker's ``sasl.jaas.config`` for ``mechanism``: PLAIN lists its users (and the
    broker's own login, Kafka's usual layout), SCRAM reads credentials from the metadata,
    OAUTHBEARER validates unsecured (``alg: none``) tokens, Kafka's development default, with the
    broker's own unsecured login naming admin as in Kafka's documentation (Kafka 4.3.1 also
    starts without that option; kbroker, for now, refuses to)."""
    if mechanism == "PLAIN":
        users = " ".join(f'user_{name}="{password}"' for name, password in USERS.items())
        return f'{LOGIN_MODULES[mechanism]} required username="admin" password="{USERS["admin"]}" {users};'
    if mechanism == "OAUTHBEARER":
        return f'{LOGIN_MODULES[mechanism]} required unsecuredLoginStringClaim_sub="admin";'
    return f"{LOGIN_MODULES[mechanism]} required;"


def secured_settings(ports: dict[str, int], controller_port: int, certs: Certificates) -> dict[str, str]:
    """The keys of the secured node (``ports``: listener name -> port, for every name in
    ``LISTENERS``); they go over the targets' single-node settings."""
    listeners = [f"{name}://{HOST}:{ports[name]}" for name in LISTENERS]
    settings = {
        "listeners": ",".join([*listeners, f"CONTROLLER://{HOST}:{controller_port}"]),
        "advertised.listeners": ",".join(listeners),
        "listener.security.protocol.map": ",".join(
            [f"{name}:{protocol}" for name, protocol in LISTENERS.items()] + ["CONTROLLER:PLAINTEXT"]),
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.plain_only.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.plain_only.plain.sasl.jaas.config": broker_jaas("PLAIN"),
    }  # fmt: skip
    for listener in ("sasl_plaintext", "sasl_ssl"):
        for mechanism in MECHANISMS:
            settings[f"listener.name.{listener}.{mechanism.lower()}.sasl.jaas.config"] = broker_jaas(mechanism)
    return settings
