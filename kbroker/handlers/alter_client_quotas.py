"""AlterClientQuotas (key 49), v0–1: ``kafka-configs --alter --entity-type users/clients/ips``.

Forwarded to the active controller unchanged, its answer returned (``FORWARD_TO_CONTROLLER``,
as Kafka's brokers forward it); the rules are in
replication/quorum/client_quota_control_manager.py. A controller that does not answer: an
answer with no entries, which the Java AdminClient reports as an error for each entity ("did not
contain a result") — the dispatcher's error answer does not see the request's entities.
"""

from __future__ import annotations

from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 49
MIN_VERSION = 0
MAX_VERSION = 1
FORWARD_TO_CONTROLLER = True


def error_response(api_version: int, error: ErrorCode) -> object:
    m = response_module(API_KEY, api_version)
    return build(m.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=())
