"""CreateAcls (key 30), v1–3: ``kafka-acls --add``, ``Admin.createAcls``.

Forwarded to the active controller (``FORWARD_TO_CONTROLLER``; its AclControlManager checks and
stores the ACLs, kbroker/controller_handlers/create_acls.py), after the broker's own checks, as
Kafka's: without an authorizer every creation is SECURITY_DISABLED "No Authorizer is
configured."; a caller without ALTER on the cluster gets CLUSTER_AUTHORIZATION_FAILED for each.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, cluster_allowed
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 30
MIN_VERSION = 1
MAX_VERSION = 3
FORWARD_TO_CONTROLLER = True
NO_AUTHORIZER = "No Authorizer is configured."


class Services(HasSecurity, Protocol): ...


def _answer(api_version: int, count: int, error: ErrorCode, message: str | None) -> object:
    m = response_module(API_KEY, api_version)
    return build(m.CreateAclsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(m.AclCreationResult, error_code=error, error_message=message) for _ in range(count)))


def answer_locally(ctx: RequestContext[Services], request: object) -> object | None:
    if ctx.services.security.authorizer is None:
        return _answer(ctx.api_version, len(request.creations), ErrorCode.security_disabled, NO_AUTHORIZER)
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return _answer(ctx.api_version, len(request.creations), ErrorCode.cluster_authorization_failed, None)
    return None


def error_response(api_version: int, error: ErrorCode) -> object:
    m = response_module(API_KEY, api_version)
    return build(m.CreateAclsResponse, throttle_time=NO_THROTTLE, results=())
