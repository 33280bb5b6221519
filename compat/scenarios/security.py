"""Security scenarios: each client stack through each way into a secured listener, on both brokers.

A security scenario runs with one client and one *way in* (``WAYS``: SSL, mTLS, or a SASL
mechanism on its listener) and returns what the client saw: a produce and consume round trip
when the credentials are right, or what the client reports when they are not (wrong password,
unknown user, a client certificate from another CA, none where one is required, a mechanism
the listener does not enable). These have their own registry, not ``compat.scenarios``'s:
they need the secured brokers of ``compat.security.session``, not the plain compat session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from compat.clients.base import Client, FetchSettings, Rec
from compat.harness import Harness
from compat.security.broker_config import USERS
from compat.security.certificates import Certificates
from compat.security.client_security import ClientSecurity

Json = Any
ROUND_TRIP_RECORDS = 3


@dataclass(frozen=True)
class Way:
    """A way into a secured broker: the listener and what the client presents there."""

    name: str  # "SSL", "mTLS" or the SASL mechanism
    listener: str

    def security(self, certs: Certificates) -> ClientSecurity:
        """Right credentials for this way in (user alice)."""
        if self.name == "SSL":
            return ClientSecurity("SSL", ca=certs.ca)
        if self.name == "mTLS":
            return ClientSecurity("SSL", ca=certs.ca, certificate=certs.client)
        tls = self.listener == "SASL_SSL"
        return ClientSecurity("SASL_SSL" if tls else "SASL_PLAINTEXT", self.name, "alice", USERS["alice"],
                              ca=certs.ca if tls else None)  # fmt: skip


# Each SASL mechanism on one of the two SASL listeners, so both listeners carry two mechanisms.
WAYS: dict[str, Way] = {w.name: w for w in (
    Way("SSL", "SSL"), Way("mTLS", "MTLS"), Way("PLAIN", "SASL_SSL"), Way("SCRAM-SHA-256", "SASL_PLAINTEXT"),
    Way("SCRAM-SHA-512", "SASL_SSL"), Way("OAUTHBEARER", "SASL_PLAINTEXT"),
)}  # fmt: skip
PASSWORD_WAYS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass
class SecurityRun:
    """One security scenario run on one broker: the client under test dialling ``way``'s
    listener, the PLAINTEXT harness for set-up, and the run's certificates."""

    scenario: SecurityScenario
    client: Client
    harness: Harness
    way: Way
    certs: Certificates

    def topic(self) -> str:
        return self.harness.create(f"s-{self.scenario.id}-{self.client.name}-{self.way.name}".replace("/", "-"))


@dataclass(frozen=True)
class SecurityScenario:
    id: str
    fn: Callable[[SecurityRun], Json]
    ways: tuple[str, ...]
    doc: str

    def listener(self, way: Way) -> str:
        """The listener this scenario dials for ``way`` (one scenario picks another)."""
        return LISTENER_OVERRIDES.get(self.id, way.listener)


SECURITY_SCENARIOS: dict[str, SecurityScenario] = {}
LISTENER_OVERRIDES = {"security/unsupported-mechanism": "PLAIN_ONLY"}


def security_scenario(id: str, ways: tuple[str, ...]) -> Callable[[Callable[[SecurityRun], Json]], Any]:
    def register(fn: Callable[[SecurityRun], Json]) -> Callable[[SecurityRun], Json]:
        SECURITY_SCENARIOS[id] = SecurityScenario(id, fn, ways, (fn.__doc__ or "").strip())
        return fn

    return register


def items() -> list[tuple[SecurityScenario, str, str]]:
    """Every (scenario, client, way) the matrix runs: the ways each client can take."""
    from compat.clients import CLIENTS

    return [(s, client, way) for s in SECURITY_SCENARIOS.values() for client, cls in CLIENTS.items()
            for way in s.ways if way in cls.SECURITY]  # fmt: skip


def _connect(run: SecurityRun, security: ClientSecurity) -> Json:
    return {"connect": run.client.connect(run.client.security_config(security))}


@security_scenario("security/round-trip", tuple(WAYS))
def round_trip(run: SecurityRun) -> Json:
    """With the right credentials a producer writes three records and a consumer reads them back."""
    config = run.client.security_config(run.way.security(run.certs))
    topic = run.topic()
    records = [Rec(f"v{i}".encode(), f"k{i}".encode()) for i in range(ROUND_TRIP_RECORDS)]
    produced = run.client.produce(topic, records, extra=config)
    consumed = run.client.consume(topic, [0], 0, max_records=ROUND_TRIP_RECORDS,
                                  settings=FetchSettings(extra=config))  # fmt: skip
    return {"produced": produced, "consumed": consumed}


@security_scenario("security/wrong-password", PASSWORD_WAYS)
def wrong_password(run: SecurityRun) -> Json:
    """A known user with a wrong password: the client reports an authentication failure."""
    return _connect(run, replace(run.way.security(run.certs), password="not-the-password"))


@security_scenario("security/unknown-user", PASSWORD_WAYS)
def unknown_user(run: SecurityRun) -> Json:
    """A user the broker does not know: the same failure as a wrong password (Kafka says no more)."""
    return _connect(run, replace(run.way.security(run.certs), username="mallory", password="mallory-secret"))


@security_scenario("security/untrusted-certificate", ("mTLS",))
def untrusted_certificate(run: SecurityRun) -> Json:
    """A client certificate signed by a CA the broker does not trust, where mTLS is required."""
    return _connect(run, replace(run.way.security(run.certs), certificate=run.certs.untrusted_client))


@security_scenario("security/missing-certificate", ("mTLS",))
def missing_certificate(run: SecurityRun) -> Json:
    """No client certificate on the listener with ``ssl.client.auth=required``."""
    return _connect(run, replace(run.way.security(run.certs), certificate=None))


@security_scenario("security/unsupported-mechanism", ("SCRAM-SHA-256",))
def unsupported_mechanism(run: SecurityRun) -> Json:
    """SCRAM-SHA-256 on a listener that enables PLAIN only: UNSUPPORTED_SASL_MECHANISM."""
    return _connect(run, run.way.security(run.certs))
