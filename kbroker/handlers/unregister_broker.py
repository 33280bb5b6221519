"""UnregisterBroker (key 64), v0: ``kafka-cluster unregister --id N``.

Registrations are the controller's, so the request is forwarded unchanged to the active
controller (``FORWARD_TO_CONTROLLER``; kbroker/controller_handlers/unregister_broker.py):
BROKER_ID_NOT_REGISTERED for an id with no registration, else the registration is removed (a
live broker's too, as Kafka allows). A controller that does not answer: REQUEST_TIMED_OUT.
"""

from __future__ import annotations

from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 64
MIN_VERSION = 0
MAX_VERSION = 0
FORWARD_TO_CONTROLLER = True


def error_response(api_version: int, error: ErrorCode) -> object:
    m = response_module(API_KEY, api_version)
    return build(m.UnregisterBrokerResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=None)
