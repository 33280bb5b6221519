"""DescribeQuorum (key 55), v0–2: ``kafka-metadata-quorum --bootstrap-server <broker> describe``.

A broker knows the metadata quorum only as an observer, so, as Kafka's brokers do, it forwards
the request unchanged to the active controller (``FORWARD_TO_CONTROLLER``) and returns its
answer: leader, epoch, high watermark, voters and observers with their log end offsets and
fetch times (kbroker/controller_handlers/describe_quorum.py). A controller that does not
answer: REQUEST_TIMED_OUT.
With an authorizer the caller needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kbroker.handlers.security import HasSecurity, cluster_refusal
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 55
MIN_VERSION = 0
MAX_VERSION = 2
FORWARD_TO_CONTROLLER = True


def answer_locally(ctx: RequestContext[HasSecurity], request: object) -> object | None:
    """Kafka's check before it forwards: DESCRIBE on the cluster."""
    return cluster_refusal(ctx, AclOperation.DESCRIBE, error_response)


def error_response(api_version: int, error: ErrorCode) -> object:
    m = response_module(API_KEY, api_version)
    return build(m.DescribeQuorumResponse, error_code=error, error_message=None, topics=(), nodes=())
