"""ListPartitionReassignments (key 46), v0: ``kafka-reassign-partitions --list`` / ``--verify``.

Forwarded to the active controller unchanged, its answer returned (``FORWARD_TO_CONTROLLER``,
as Kafka's ``maybeForwardToController``). A controller that does not answer: REQUEST_TIMED_OUT.
With an authorizer the caller needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kbroker.handlers.security import HasSecurity, cluster_refusal
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0
FORWARD_TO_CONTROLLER = True


def answer_locally(ctx: RequestContext[HasSecurity], request: object) -> object | None:
    """Kafka's check before it forwards: DESCRIBE on the cluster."""
    return cluster_refusal(ctx, AclOperation.DESCRIBE, error_response)


def error_response(api_version: int, error: ErrorCode) -> object:
    m = response_module(API_KEY, api_version)
    return build(m.ListPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=error,
                 error_message=None, topics=())
