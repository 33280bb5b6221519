"""ElectLeaders (key 43), v0–2: ``kafka-leader-election`` and AdminClient.electLeaders.

Forwarded to the active controller unchanged, its answer returned (``FORWARD_TO_CONTROLLER``:
the Dispatcher's one rule, as Kafka's ``maybeForwardToController``); the rules are in
kbroker/controller_handlers/elect_leaders.py. A controller that does not answer:
REQUEST_TIMED_OUT.
With an authorizer the caller needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kbroker.handlers.security import HasSecurity, cluster_refusal
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2
FORWARD_TO_CONTROLLER = True


def answer_locally(ctx: RequestContext[HasSecurity], request: object) -> object | None:
    """Kafka's check before it forwards: ALTER on the cluster."""
    return cluster_refusal(ctx, AclOperation.ALTER, error_response)


def error_response(api_version: int, error: ErrorCode) -> object:
    m = response_module(API_KEY, api_version)
    return build(m.ElectLeadersResponse, throttle_time=NO_THROTTLE, error_code=error, replica_election_results=())
