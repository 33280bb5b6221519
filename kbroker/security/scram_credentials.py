"""The broker's view of SCRAM credentials: a user's credential for a mechanism, looked up in the
metadata image the broker has replayed (UserScramCredentialRecord: salt, StoredKey, ServerKey,
iterations; never the password), and every user's mechanisms for DescribeUserScramCredentials.

Lookups read the current image each time, so a credential the controller committed is usable
as soon as this broker has replayed it, and a deleted one stops working then.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kbroker.replication.quorum.metadata_image import MetadataImage
from kbroker.replication.quorum.metadata_records import UserScramCredentialRecord

# Kafka's ScramMechanism codes, as in UserScramCredentialRecord and the SCRAM admin APIs.
SCRAM_MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
SCRAM_MECHANISM_NAMES = {code: name for name, code in SCRAM_MECHANISM_CODES.items()}


class ScramCredentials:
    """Credentials as the current metadata image holds them."""

    def __init__(self, image: Callable[[], MetadataImage]) -> None:
        self._image = image

    def lookup(self, user: str, mechanism: str) -> UserScramCredentialRecord | None:
        code = SCRAM_MECHANISM_CODES.get(mechanism)
        if code is None:
            return None
        return self._image().scram_credentials.get((user, code))

    def credentials(self) -> Mapping[str, Sequence[tuple[int, int]]]:
        """Each user's (mechanism code, iterations), users in name order, mechanisms by code."""
        out: dict[str, list[tuple[int, int]]] = {}
        for (user, code), record in sorted(self._image().scram_credentials.items()):
            out.setdefault(user, []).append((code, record.iterations))
        return out
