"""Client quotas: AlterClientQuotas and DescribeClientQuotas answers, errors and messages
included, from raw requests (kio) over a socket — the same bytes to Kafka and to kbroker."""

from __future__ import annotations

import datetime
import importlib
import itertools
import time
from typing import Any

from kio.schema.alter_client_quotas.v1 import request as alter_v1
from kio.schema.describe_client_quotas.v1 import request as describe_v1
from kio.static.primitive import i16, i32

from compat.harness import wait_until
from compat.scenarios import Run, scenario
from compat.scenarios.protocol import RawConnection

RAW_CLIENT_ID = "compat-raw"  # RawConnection's client id
SEEN_WITHIN_S = 30.0  # Kafka's broker replays the committed records a moment after the answer
EXACT, DEFAULT, SPECIFIED = 0, 1, 2

ALTERATIONS: list[tuple[dict[str, str | None], list[tuple[str, float | None]]]] = [
    ({"user": "alice", "client-id": "app"}, [("producer_byte_rate", 1048576.0), ("consumer_byte_rate", 2097152.0)]),
    ({"user": None}, [("request_percentage", 12.5)]),
    ({"client-id": None}, [("controller_mutation_rate", 10.0)]),
    ({"ip": "10.1.2.3"}, [("connection_creation_rate", 20.0)]),
    ({"user": "bob"}, [("foo", 1.0)]),
    ({"user": "carol"}, [("producer_byte_rate", -5.0)]),
    ({"user": "dave"}, [("producer_byte_rate", 1.5)]),
    ({"user": "erin", "ip": "10.0.0.1"}, [("producer_byte_rate", 5.0)]),
    ({"user": ""}, [("producer_byte_rate", 5.0)]),
    ({"client-id": "app"}, [("connection_creation_rate", 5.0)]),
]
FILTERS: list[tuple[list[tuple[str, int, str | None]], bool]] = [
    ([("user", EXACT, "alice")], False),
    ([("user", EXACT, "alice")], True),
    ([("user", SPECIFIED, None)], True),
    ([("user", SPECIFIED, None)], False),
    ([("user", DEFAULT, None)], True),
    ([("client-id", DEFAULT, None)], False),
    ([("ip", SPECIFIED, None)], False),
    ([], False),
    ([("user", EXACT, None)], False),
    ([("user", DEFAULT, "x")], False),
    ([("user", SPECIFIED, None), ("user", EXACT, "a")], False),
    ([("ip", SPECIFIED, None), ("user", SPECIFIED, None)], False),
    ([("group", SPECIFIED, None)], False),
]


def _alter(conn: RawConnection, alterations: Any, validate_only: bool) -> list[Any]:
    entries = tuple(
        alter_v1.EntryData(
            entity=tuple(alter_v1.EntityData(entity_type=k, entity_name=n) for k, n in entity.items()),
            ops=tuple(alter_v1.OpData(key=key, value=value or 0.0, remove=value is None) for key, value in ops))
        for entity, ops in alterations)
    answer = conn.request(49, 1, alter_v1.AlterClientQuotasRequest(entries=entries, validate_only=validate_only))
    return sorted([sorted((e.entity_type, e.entity_name or "<default>") for e in entry.entity), int(entry.error_code),
                   entry.error_message] for entry in answer.entries)


def _describe(conn: RawConnection, components: Any, strict: bool) -> Any:
    answer = conn.request(48, 1, describe_v1.DescribeClientQuotasRequest(components=tuple(
        describe_v1.ComponentData(entity_type=k, match_type=m, match=n) for k, m, n in components), strict=strict))
    entries = None if answer.entries is None else sorted(
        [sorted((e.entity_type, e.entity_name or "<default>") for e in entry.entity),
         sorted((v.key, v.value) for v in entry.values)] for entry in answer.entries)
    return {"error": int(answer.error_code), "message": answer.error_message, "entries": entries}


@scenario("quotas/alter-describe", clients=("confluent",))
def alter_describe(run: Run) -> Any:
    """AlterClientQuotas with valid and invalid entries (unknown key, value <= 0, fractional
    LONG, ip mixed with user, empty name, an ip key on a client), validate_only, then
    DescribeClientQuotas with EXACT/DEFAULT/SPECIFIED filters, strict or not, and bad filters."""
    conn = RawConnection(run.target.bootstrap)
    try:
        validated = _alter(conn, [({"user": "zed"}, [("producer_byte_rate", 5.0)])], validate_only=True)
        altered = _alter(conn, ALTERATIONS, validate_only=False)
        deadline = time.monotonic() + SEEN_WITHIN_S
        while len(_describe(conn, [], False)["entries"] or []) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)  # polling a condition with a deadline: Kafka's broker applies the records later
        described = [_describe(conn, components, strict) for components, strict in FILTERS]
        removed = _alter(conn, [({"user": None}, [("request_percentage", None)])], validate_only=False)
    finally:
        # The targets are shared with later scenarios: no quota of this one may outlive it.
        _alter(conn, [(entity, [(key, None) for key, _v in ops]) for entity, ops in ALTERATIONS[:4]],
               validate_only=False)
        conn.close()
    return {"validate_only": validated, "alter": altered, "describe": described, "remove": removed}


def _create(conn: RawConnection, version: int, name: str, partitions: int) -> tuple[int, str | None, int]:
    module = importlib.import_module(f"kio.schema.create_topics.v{version}.request")
    answer = conn.request(19, version, module.CreateTopicsRequest(
        topics=(module.CreatableTopic(name=name, num_partitions=i32(partitions), replication_factor=i16(1),
                                      assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=30), validate_only=False))
    (topic,) = answer.topics
    return int(topic.error_code), topic.error_message, int(answer.throttle_time.total_seconds() * 1000)


@scenario("quotas/controller-mutation-rate", clients=("confluent",))
def controller_mutation_rate(run: Run) -> Any:
    """controller_mutation_rate=1 for the raw connection's client id (a burst of 11 partitions):
    CreateTopics v7 (strict) takes topics of 12 partitions until one is refused with
    THROTTLING_QUOTA_EXCEEDED and a throttle time; CreateTopics v5 (permissive) is served with a
    throttle time instead. The quota is removed at the end (other raw scenarios share the id)."""
    conn = RawConnection(run.target.bootstrap)
    entity = {"client-id": RAW_CLIENT_ID}
    try:
        _alter(conn, [(entity, [("controller_mutation_rate", 1.0)])], validate_only=False)
        prefix = run.topic()
        refused = None
        deadline = time.monotonic() + SEEN_WITHIN_S
        for i in itertools.count():
            error, message, throttle_ms = _create(conn, 7, f"{prefix}-strict-{i}", 12)
            if error != 0 or time.monotonic() > deadline:
                refused = {"error": error, "message": message, "throttled": throttle_ms > 0}
                break
            time.sleep(0.1)  # until the broker applies the quota: a condition polled with a deadline
        error, message, throttle_ms = _create(conn, 5, f"{prefix}-permissive", 12)
        permissive = {"error": error, "message": message, "throttled": throttle_ms > 0}
    finally:
        _alter(conn, [(entity, [("controller_mutation_rate", None)])], validate_only=False)
        conn.close()
    return {"strict": refused, "permissive": permissive}


CONFIGS = "kafka.admin.ConfigCommand"


@scenario("quotas/kafka-configs-cli", clients=("java-cli",))
def kafka_configs_cli(run: Run) -> Any:
    """kafka-configs --entity-type users/clients: a user+client quota and a default client quota
    set, described (one entity, all users, all clients, the defaults), Kafka's refusals (a
    negative value, an unknown key, a non-number), then deleted."""
    user, client = run.name("u"), run.name("c")
    pair = ("--entity-type", "users", "--entity-name", user, "--entity-type", "clients", "--entity-name", client)
    default_client = ("--entity-type", "clients", "--entity-default")

    def configs(*args: str) -> Any:
        out = run.client.run(CONFIGS, *args)  # type: ignore[attr-defined]
        out["stderr"] = [line for line in out["stderr"] if not line.startswith("\tat ") and "... " not in line]
        return out

    def described(*entity: str) -> Any:
        """--describe once the broker shows a quota (Kafka's broker replays it shortly after)."""
        return wait_until(lambda: configs("--describe", *entity), lambda out: out["stdout"] != [],
                          SEEN_WITHIN_S)[1]

    outcome = {
        "set-pair": configs("--alter", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152",
                            *pair),
        "set-default-client": configs("--alter", "--add-config", "request_percentage=200", *default_client),
    }
    outcome["pair"] = described(*pair)
    outcome["default-client"] = described(*default_client)
    outcome["user-all"] = configs("--describe", "--entity-type", "users", "--entity-name", user)
    outcome["negative"] = configs("--alter", "--add-config", "producer_byte_rate=-1", *pair)
    outcome["unknown-key"] = configs("--alter", "--add-config", "no_such_rate=1", *pair)
    outcome["not-a-number"] = configs("--alter", "--add-config", "producer_byte_rate=fast", *pair)
    outcome["delete-pair"] = configs("--alter", "--delete-config", "producer_byte_rate,consumer_byte_rate", *pair)
    outcome["delete-default-client"] = configs("--alter", "--delete-config", "request_percentage", *default_client)
    outcome["pair-after"] = wait_until(lambda: configs("--describe", *pair), lambda out: out["stdout"] == [],
                                       SEEN_WITHIN_S)[1]
    return outcome
