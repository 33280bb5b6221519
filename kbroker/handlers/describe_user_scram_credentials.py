"""DescribeUserScramCredentials (key 50), v0: ``kafka-configs --describe --entity-type users``.

Answers each user's SCRAM mechanisms and iteration counts from the credentials in this broker's
replayed metadata image (``SecurityFeatures.scram``, kbroker/security/scram_credentials.py), as
Kafka's broker answers from its metadata cache: all users (a null or empty list) lists every user
with a credential; a named user without credentials is RESOURCE_NOT_FOUND "Attempt to describe a
user credential that does not exist: <user>"; a user named twice is answered once, before
the others as Kafka orders them, with DUPLICATE_RESOURCE "Cannot describe SCRAM credentials for
the same user twice in a single request: <user>". Without a store every user is unknown.
With an authorizer the caller needs DESCRIBE on the cluster, else the answer is
CLUSTER_AUTHORIZATION_FAILED, at the top and for each user asked about.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from kbroker.handlers.security import CLUSTER_DENIED, HasSecurity, cluster_allowed
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0


class Services(HasSecurity, Protocol): ...


async def handle(ctx: RequestContext[Services], request: object) -> object:
    m = response_module(API_KEY, ctx.api_version)
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        # Kafka's error response: the error at the top and once per user asked about (user name
        # empty); librdkafka counts on the per-user results (it crashed on none).
        denied = build(m.DescribeUserScramCredentialsResult, user="", error_code=ErrorCode.cluster_authorization_failed,
                       error_message=CLUSTER_DENIED, credential_infos=())
        return build(m.DescribeUserScramCredentialsResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.cluster_authorization_failed, error_message=CLUSTER_DENIED,
                     results=tuple(denied for _ in request.users or ()))
    store = ctx.services.security.scram
    known = store.credentials() if store is not None else {}
    results = []
    if not request.users:
        users = list(known)
        counts = Counter(users)
    else:
        counts = Counter(u.name for u in request.users)
        # Kafka answers the users named twice first, then the others in request order.
        users = sorted(counts, key=lambda user: counts[user] == 1)
    for user in users:
        error, message, infos = ErrorCode.none, "", ()
        if counts[user] > 1:
            error = ErrorCode.duplicate_resource
            message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
        elif user not in known:
            error = ErrorCode.resource_not_found
            message = f"Attempt to describe a user credential that does not exist: {user}"
        else:
            infos = tuple(build(m.CredentialInfo, mechanism=mechanism, iterations=iterations)
                          for mechanism, iterations in known[user])
        results.append(build(m.DescribeUserScramCredentialsResult, user=user, error_code=error,
                             error_message=message, credential_infos=infos))
    return build(m.DescribeUserScramCredentialsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 error_message="", results=tuple(results))
