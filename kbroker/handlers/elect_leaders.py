"""ElectLeaders (key 43), v0–2: ``kafka-leader-election`` and AdminClient.electLeaders.

Forwarded to the active controller unchanged, its answer returned (``FORWARD_TO_CONTROLLER``:
the Dispatcher's one rule, as Kafka's ``maybeForwardToController``); the rules are in
kbroker/controller_handlers/elect_leaders.py. A controller that does not answer:
REQUEST_TIMED_OUT.
"""

from __future__ import annotations

from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2
FORWARD_TO_CONTROLLER = True


def error_response(api_version: int, error: ErrorCode) -> object:
    m = response_module(API_KEY, api_version)
    return build(m.ElectLeadersResponse, throttle_time=NO_THROTTLE, error_code=error, replica_election_results=())
