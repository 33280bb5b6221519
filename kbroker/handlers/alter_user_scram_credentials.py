"""AlterUserScramCredentials (key 51), v0: ``kafka-configs --alter --entity-type users
--add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'``.

Credentials are metadata, so the request is forwarded unchanged to the active controller
(``FORWARD_TO_CONTROLLER``; kbroker/controller_handlers/alter_user_scram_credentials.py), which
stores salted keys as UserScramCredentialRecord; every broker then authenticates the user from
its replayed image. A controller that does not answer: REQUEST_TIMED_OUT for every user.
"""

from __future__ import annotations

from kbroker.protocol.codec import NO_THROTTLE, build, response_module
from kbroker.protocol.errors import ErrorCode

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0
FORWARD_TO_CONTROLLER = True


def error_response(api_version: int, error: ErrorCode) -> object:
    # The request is not at hand here, so there are no per-user results: the admin client fails
    # each user it asked about.
    m = response_module(API_KEY, api_version)
    return build(m.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=())
