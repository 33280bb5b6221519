"""Which configured quota applies to a (user, client id), and which clients share its sensor.

Kafka's order (KIP-55), first match wins, per quota key:
/users/<user>/clients/<client-id>, /users/<user>/clients/<default>, /users/<user>,
/users/<default>/clients/<client-id>, /users/<default>/clients/<default>, /users/<default>,
/clients/<client-id>, /clients/<default>.
The user is the principal's name (``ANONYMOUS`` on a PLAINTEXT listener), the client id the
request header's. The sensor key is Kafka's metric tags: a quota matched at a level naming both
types is measured per (user, client id), a user level per user (every client id of the user
shares it), a client level per client id — so ``/users/<default>`` limits each user separately.
"""

from __future__ import annotations

from collections.abc import Mapping

from kbroker.replication.quorum.client_quota_control_manager import CLIENT_ID, USER, QuotaEntity

QuotaConfigs = Mapping[QuotaEntity, Mapping[str, float]]
SensorKey = tuple[str, str]  # (user, client id) as Kafka's metric tags, "" for a type not measured apart


def applicable_quota(configs: QuotaConfigs, key: str, user: str, client_id: str) -> tuple[float, SensorKey] | None:
    """The quota ``key`` that applies to this user and client id and its sensor, or None: unlimited."""
    both = (user, client_id)
    for entity, sensor in (
        (((CLIENT_ID, client_id), (USER, user)), both),
        (((CLIENT_ID, None), (USER, user)), both),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), both),
        (((CLIENT_ID, None), (USER, None)), both),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    ):
        quotas = configs.get(entity)
        if quotas is not None and key in quotas:
            return quotas[key], sensor
    return None
