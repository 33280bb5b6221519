"""ClientQuotaControlManager: decides an AlterClientQuotas request against the image, as Kafka's
controller does, and names the ClientQuotaRecords that carry it out.

Each entry is checked on its own (Kafka commits the records of the entries that passed and
answers an error for the others): the entity's types must be ``user``, ``client-id`` and ``ip``
in one of Kafka's combinations (user and/or client-id, or ip alone), a name may be None (the
type's default entity, ``--entity-default``) but not empty, each key must be one of that
combination's quota keys and each value above zero (a whole number for the integral keys). A
value equal to the stored one writes no record; removing a key that is not set writes none
either. The messages are Kafka's, word for word (clients show them), including Kafka's missing
space in the ip-combination message.

Deviation: an ip entity's name must be an IP address literal; Kafka also accepts a host name it
can resolve (a DNS lookup kbroker does not make on the controller's event loop).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kbroker.protocol.errors import ErrorCode, KafkaError

from .metadata_records import ClientQuotaRecord

USER, CLIENT_ID, IP = "user", "client-id", "ip"
# (entity type, name): None is the type's default entity.
QuotaEntity = tuple[tuple[str, str | None], ...]

# Kafka's QuotaConfig: the keys a user / client-id entity takes, the keys an ip entity takes,
# and whether each value must be a whole number (LONG and INT keys) and its largest value.
_LONG_MAX = float(2**63 - 1)
USER_CLIENT_KEYS: Mapping[str, float | None] = {
    "producer_byte_rate": _LONG_MAX,
    "consumer_byte_rate": _LONG_MAX,
    "request_percentage": None,
    "controller_mutation_rate": None,
}
IP_KEYS: Mapping[str, float | None] = {"connection_creation_rate": float(2**31 - 1)}
_TOO_LARGE = {_LONG_MAX: "a LONG", float(2**31 - 1): "an INT"}


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """One AlterClientQuotas entry: the entity as sent, and key -> new value (None: remove)."""

    entity: QuotaEntity
    ops: Sequence[tuple[str, float | None]]


def quota_entity(pairs: Mapping[str, str | None]) -> QuotaEntity:
    """The image's key for an entity: its (type, name) pairs sorted by type."""
    return tuple(sorted(pairs.items()))


def alter_client_quotas(
    current: Mapping[QuotaEntity, Mapping[str, float]], alterations: Sequence[QuotaAlteration],
) -> tuple[list[tuple[QuotaEntity, KafkaError | None]], list[ClientQuotaRecord]]:
    """Each entry's outcome (None: accepted) in request order, and the records to commit."""
    results: dict[QuotaEntity, KafkaError | None] = {}
    records: list[ClientQuotaRecord] = []
    for alteration in alterations:
        entity = quota_entity(dict(alteration.entity))
        if entity in results:
            # Kafka answers a repeated entity once, with this error (the first one's records stay).
            results[entity] = KafkaError(ErrorCode.invalid_request,
                                         f"Ignoring duplicate entity {_kafka_entity(entity)}")
            continue
        try:
            records.extend(_entity_records(entity, alteration.ops, current.get(entity, {})))
            results[entity] = None
        except KafkaError as exc:
            results[entity] = exc
    return list(results.items()), records


def _entity_records(entity: QuotaEntity, ops: Sequence[tuple[str, float | None]],
                    current: Mapping[str, float]) -> list[ClientQuotaRecord]:
    keys = _keys_for(entity)
    wanted: dict[str, float | None] = {}
    for key, value in ops:
        if key in wanted:
            raise KafkaError(ErrorCode.invalid_request, f"Duplicate quota key {key} not updating quota for this "
                                                        f"entity {_kafka_entity(entity)}")
        wanted[key] = value
    records = []
    for key, value in wanted.items():
        if value is None:
            if key in current:
                records.append(ClientQuotaRecord(entity, key, 0.0, remove=True))
            continue
        _check_value(keys, key, value)
        if current.get(key) != value:
            records.append(ClientQuotaRecord(entity, key, value))
    return records


def _keys_for(entity: QuotaEntity) -> Mapping[str, float | None]:
    """The quota keys of the entity's type combination (INVALID_REQUEST for a bad entity)."""
    if not entity:
        raise KafkaError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    types = dict(entity)
    for kind, name in entity:
        if kind not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.invalid_request, f"Unhandled client quota entity type: {kind}")
        if name == "":
            raise KafkaError(ErrorCode.invalid_request, f"Empty {kind} not supported")
    if IP in types:
        if len(types) > 1:
            raise KafkaError(ErrorCode.invalid_request, "Invalid quota entity combination, IP entity should"
                                                        "not be combined with User or ClientId")
        name = types[IP]
        if name is not None and not _is_ip_literal(name):
            raise KafkaError(ErrorCode.invalid_request, f"{name} is not a valid IP or resolvable host.")
        return IP_KEYS
    return USER_CLIENT_KEYS


def _check_value(keys: Mapping[str, float | None], key: str, value: float) -> None:
    if key not in keys:
        raise KafkaError(ErrorCode.invalid_request, f"Invalid configuration key {key}")
    if value <= 0.0:
        raise KafkaError(ErrorCode.invalid_request, f"Quota {key} must be greater than 0")
    largest = keys[key]
    if largest is None:
        return  # a DOUBLE key: any positive value
    if value > largest:
        raise KafkaError(ErrorCode.invalid_request, f"Proposed value for {key} is too large for {_TOO_LARGE[largest]}.")
    if abs(value % 1.0) > 1e-6:
        raise KafkaError(ErrorCode.invalid_request, f"{key} cannot be a fractional value.")


def _is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _kafka_entity(entity: QuotaEntity) -> str:
    """How Kafka's ClientQuotaEntity prints in its messages: ``ClientQuotaEntity(entries={user=alice})``."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{kind}={name}" for kind, name in entity) + "})"
