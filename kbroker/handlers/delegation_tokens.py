"""What the four delegation-token APIs share: Kafka's refusal on a PLAINTEXT connection.

A Kafka broker refuses every delegation-token request that arrives on a PLAINTEXT connection
(or from an anonymous SSL client, or one authenticated by a token) with
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, before it looks whether tokens are enabled; kbroker's
listeners are PLAINTEXT, so that is every answer until SASL listeners exist (#18).
"""

from __future__ import annotations

import datetime

from kbroker.protocol.errors import ErrorCode

NOT_ALLOWED = ErrorCode.delegation_token_request_not_allowed
# Kafka answers -1 for the timestamps of a refused request; one millisecond before the epoch
# is how kio writes -1 into a timestamp field.
NO_TIMESTAMP = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) - datetime.timedelta(milliseconds=1)
# The principal of a PLAINTEXT connection.
ANONYMOUS = ("User", "ANONYMOUS")
