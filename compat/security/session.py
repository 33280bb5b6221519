"""Both brokers secured alike, and each security scenario run on both with the same client.

``SecuredSession`` makes one set of certificates, starts Apache Kafka 4.3.1 and kbroker from
the same secured settings (``compat.security.brokers``), creates the SCRAM users on each with
AlterUserScramCredentials over PLAINTEXT (and waits until each describes them), and runs a
``compat.scenarios.security`` scenario for one (client, way) on both brokers. Outcomes are
normalised as the compat suite does (``compat.normalise``) plus the rules below, and compared.

Python ``python -m compat.security.session [--only kafka]`` runs the whole matrix and prints the
counts (identical / differ / error per scenario); ``--only kafka`` runs Kafka alone, to check
the harness itself.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from compat.clients import CLIENTS
from compat.clients.base import Client
from compat.harness import Harness, HarnessError, wait_until
from compat.normalise import Context, normalise
from compat.scenarios.security import WAYS, SecurityRun, SecurityScenario, items
from compat.security.broker_config import SCRAM_ITERATIONS, USERS
from compat.security.brokers import SecuredTarget, secured_target
from compat.security.certificates import make_certificates
from compat.session import PairResult, TargetRun, compare, start_side_by_side

BROKERS = ("kafka", "kbroker")
SCRAM_READY_S = 30.0
# librdkafka reports how long a failed connection spent in its last state and how many
# identical errors it suppressed; both depend on timing, not on the broker.
LIBRDKAFKA_TIMING = re.compile(r"\(after \d+ms in state (\w+)(?:, \d+ identical error\(s\) suppressed)?\)")
# The client's own end of a connection (kafka-python: "[127.0.0.1:9093<-51234]") and the
# Java admin client's sequence number in its JVM: neither says anything about the broker.
LOCAL_PORT = re.compile(r"<-\d+\]")
LIBRDKAFKA_LOG_TIME = re.compile(r"^%(\d)\|\d+\.\d+\|")  # kcat's log lines: %level|epoch seconds|...
JAVA_ADMIN_ID = re.compile(r"adminclient-\d+")


def normalise_security(value: Any, target: SecuredTarget) -> Any:
    """Each listener's address becomes ``<LISTENER>`` (ports differ between the brokers) and
    librdkafka's timing remarks lose their numbers."""
    if isinstance(value, dict):
        return {k: normalise_security(v, target) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise_security(v, target) for v in value]
    if isinstance(value, str):
        for listener, port in target.ports.items():
            value = value.replace(target.address(listener), f"<{listener}>")
            value = re.sub(rf"\b{port}\b", f"<{listener}-port>", value)  # aiokafka: ('127.0.0.1', port, ...)
        value = LOCAL_PORT.sub("<-<local-port>]", value)
        value = JAVA_ADMIN_ID.sub("adminclient-<n>", value)
        value = LIBRDKAFKA_LOG_TIME.sub(r"%\1|<time>|", value)
        return LIBRDKAFKA_TIMING.sub(r"(after <n>ms in state \1)", value)
    return value


class SecuredBroker:
    """One secured broker with its set-up harness and client adapters per (client, way)."""

    def __init__(self, secured: SecuredTarget, workdir: Path) -> None:
        self.secured = secured
        self.workdir = workdir
        self.harness: Harness | None = None
        self.cluster_id = ""
        self.clients: dict[tuple[str, str], Client] = {}

    def start(self) -> None:
        self.secured.target.start()
        self.harness = Harness(self.secured.target.bootstrap, self.workdir / "harness")
        self.cluster_id = self.harness.cluster_id()
        self.add_scram_users()

    def add_scram_users(self) -> None:
        """Both SCRAM mechanisms for every user (one request per credential: Kafka refuses two
        changes to one user in a request), then wait until the broker describes them all."""
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        assert self.harness is not None
        admin = self.harness.admin
        for user, password in USERS.items():
            for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
                upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, SCRAM_ITERATIONS),
                                                      password.encode())  # fmt: skip
                for future in admin.alter_user_scram_credentials([upsert]).values():
                    future.result(timeout=15)

        def described() -> int:
            try:
                found = admin.describe_user_scram_credentials(list(USERS)).values()
                return sum(len(f.result(timeout=5).scram_credential_infos) for f in found)
            except Exception:  # not replayed yet: the user is unknown
                return 0

        if not wait_until(described, lambda n: n == 2 * len(USERS), SCRAM_READY_S)[0]:
            raise HarnessError("SCRAM credentials not described after AlterUserScramCredentials")

    def client(self, name: str, way: str, listener: str) -> Client:
        key = (name, listener)
        if key not in self.clients:
            self.clients[key] = CLIENTS[name](self.secured.address(listener), self.workdir / f"{name}-{listener}")
        return self.clients[key]

    def close(self) -> None:
        for client in self.clients.values():
            try:
                client.close()
            except Exception:  # one client failing to close must not keep the broker up
                traceback.print_exc()
        if self.secured.target.is_running():
            self.secured.target.stop()


class SecuredSession:
    """Kafka and kbroker, secured alike (``brokers``: which of them to start)."""

    def __init__(self, workdir: Path, brokers: tuple[str, ...] = BROKERS) -> None:
        self.certs = make_certificates(workdir / "certs")
        self.brokers = {
            kind: SecuredBroker(secured_target(kind, workdir / kind, self.certs), workdir / f"{kind}-clients")
            for kind in brokers
        }
        self.results: list[PairResult] = []

    def start(self) -> None:
        """Start every broker at once (Kafka's JVM takes a few seconds); any failure stops all."""
        start_side_by_side([broker.start for broker in self.brokers.values()], self.close)

    def run_on(self, kind: str, scenario: SecurityScenario, client: str, way: str) -> TargetRun:
        broker = self.brokers[kind]
        assert broker.harness is not None
        listener = scenario.listener(WAYS[way])
        run = SecurityRun(scenario, broker.client(client, way, listener), broker.harness, WAYS[way], self.certs)
        started, t0 = int(time.time() * 1000), time.monotonic()
        try:
            raw, error = json.loads(json.dumps(scenario.fn(run))), None
        except Exception:
            raw, error = None, traceback.format_exc()
        ctx = Context(broker.secured.target.bootstrap, broker.cluster_id, (started, int(time.time() * 1000)))
        outcome = normalise_security(normalise(raw, ctx), broker.secured)
        return TargetRun(outcome, error, round(time.monotonic() - t0, 3))

    def run_pair(self, scenario: SecurityScenario, client: str, way: str) -> PairResult:
        """Run on Kafka, then on kbroker (one after the other: the failure cases are timed by
        the clients' own retry loops, which two brokers' worth of clients on two cores would stretch)."""
        kafka = self.run_on("kafka", scenario, client, way)
        kbroker = self.run_on("kbroker", scenario, client, way)
        status, diff = compare(kafka, kbroker)
        result = PairResult(f"{scenario.id}[{way}]", client, status, kafka, kbroker, diff)
        self.results.append(result)
        return result

    def close(self) -> None:
        for broker in self.brokers.values():
            broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=BROKERS, help="run one broker alone and print its outcomes")
    parser.add_argument("--clients", help="comma-separated client names (default: every client)")
    parser.add_argument("--out", type=Path, help="write every result as JSON here")
    args = parser.parse_args()
    clients = set(args.clients.split(",")) if args.clients else set(CLIENTS)
    matrix = [(s, c, w) for s, c, w in items() if c in clients]
    with tempfile.TemporaryDirectory(prefix="compat-security-") as tmp:
        session = SecuredSession(Path(tmp), (args.only,) if args.only else BROKERS)
        session.start()
        try:
            counts: Counter[tuple[str, str]] = Counter()
            for scenario, client, way in matrix:
                if args.only:
                    r = session.run_on(args.only, scenario, client, way)
                    print(f"{scenario.id}[{way}] {client} {r.seconds}s", r.error or json.dumps(r.outcome)[:600])
                    continue
                result = session.run_pair(scenario, client, way)
                counts[(scenario.id, result.status)] += 1
                print(f"{result.scenario} {client}: {result.status} "
                      f"({result.kafka.seconds}s / {result.kbroker.seconds}s)", flush=True)  # fmt: skip
                if result.status != "identical":
                    print(result.diff[:3000])
            for (scenario_id, status), n in sorted(counts.items()):
                print(f"{scenario_id}: {status} {n}")
            print("total:", dict(Counter(r.status for r in session.results)), "of", len(matrix))
            if args.out:
                args.out.write_text(json.dumps([r.to_json() for r in session.results], indent=1))
        finally:
            session.close()


if __name__ == "__main__":
    main()
