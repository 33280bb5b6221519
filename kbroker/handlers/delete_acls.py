"""DeleteAcls (key 31), v1–3: ``kafka-acls --remove``, ``Admin.deleteAcls``.

Forwarded to the active controller (``FORWARD_TO_CONTROLLER``; kbroker/controller_handlers/
delete_acls.py removes what each filter matches), after the broker's own checks, as Kafka's:
without an authorizer every filter is SECURITY_DISABLED "No Authorizer is configured." with no
matching ACLs; a caller without ALTER on the cluster gets CLUSTER_AUTHORIZATION_FAILED for each.
"""

from __future__ import annotations

from typing import Protocol

from kbroker.handlers.security import HasSecurity, cluster_allowed
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3
FORWARD_TO_CONTROLLER = True
NO_AUTHORIZER = "No Authorizer is configured."


class Services(HasSecurity, Protocol): ...


def _answer(api_version: int, count: int, error: ErrorCode, message: str | None) -> object:
    m = response_module(API_KEY, api_version)
    return build(m.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(
        build(m.DeleteAclsFilterResult, error_code=error, error_message=message, matching_acls=())
        for _ in range(count)))


def answer_locally(ctx: RequestContext[Services], request: object) -> object | None:
    if ctx.services.security.authorizer is None:
        return _answer(ctx.api_version, len(request.filters), ErrorCode.security_disabled, NO_AUTHORIZER)
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return _answer(ctx.api_version, len(request.filters), ErrorCode.cluster_authorization_failed, None)
    return None


def error_response(api_version: int, error: ErrorCode) -> object:
    m = response_module(API_KEY, api_version)
    return build(m.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=())
