"""UnregisterBroker (key 64), v0: ``kafka-cluster unregister --id N``.

Registrations are the controller's, so the request is forwarded unchanged to the active
controller (``FORWARD_TO_CONTROLLER``; kbroker/controller_handlers/unregister_broker.py):
BROKER_ID_NOT_REGISTERED for an id with no registration, else the registration is removed (a
live broker's too, as Kafka allows). A controller that does not answer: REQUEST_TIMED_OUT.
With an authorizer the caller needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kbroker.handlers.security import HasSecurity, cluster_refusal
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 64
MIN_VERSION = 0
MAX_VERSION = 0
FORWARD_TO_CONTROLLER = True


def answer_locally(ctx: RequestContext[HasSecurity], request: object) -> object | None:
    """Kafka's check before it forwards: ALTER on the cluster."""
    return cluster_refusal(ctx, AclOperation.ALTER, error_response)


def error_response(api_version: int, error: ErrorCode) -> object:
    m = response_module(API_KEY, api_version)
    return build(m.UnregisterBrokerResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=None)
