"""AlterUserScramCredentials (key 51), v0: ``kafka-configs --alter --entity-type users
--add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'``.

Credentials are metadata, so the request is forwarded unchanged to the active controller
(``FORWARD_TO_CONTROLLER``; kbroker/controller_handlers/alter_user_scram_credentials.py), which
stores salted keys as UserScramCredentialRecord; every broker then authenticates the user from
its replayed image. A controller that does not answer: REQUEST_TIMED_OUT for every user.
With an authorizer the caller needs ALTER on the cluster: checked before forwarding (Kafka's
controller checks it), every user named answered CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from kbroker.handlers.security import CLUSTER_DENIED, HasSecurity, cluster_allowed
from kbroker.network.context import RequestContext
from kbroker.protocol.acl import AclOperation
from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0
FORWARD_TO_CONTROLLER = True


def answer_locally(ctx: RequestContext[HasSecurity], request: object) -> object | None:
    """Kafka's check: ALTER on the cluster, else each user named (deletions, then upsertions,
    once each) is refused."""
    if cluster_allowed(ctx, AclOperation.ALTER):
        return None
    m = response_module(API_KEY, ctx.api_version)
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    results = tuple(build(m.AlterUserScramCredentialsResult, user=user,
                          error_code=ErrorCode.cluster_authorization_failed, error_message=CLUSTER_DENIED)
                    for user in users)
    return build(m.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=results)


def error_response(api_version: int, error: ErrorCode) -> object:
    # The request is not at hand here, so there are no per-user results: the admin client fails
    # each user it asked about.
    m = response_module(API_KEY, api_version)
    return build(m.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=())
