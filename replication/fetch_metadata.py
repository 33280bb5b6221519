"""A fetch session's id and epoch on the wire (KIP-227, Kafka's FetchMetadata): the reserved
values and how an epoch advances. Shared by the serving broker's session cache and the fetcher's
session handler."""

from __future__ import annotations

INVALID_SESSION_ID = 0  # no session
INITIAL_EPOCH = 0  # a full fetch that asks for a session (and closes the one it names)
FINAL_EPOCH = -1  # a full fetch that asks for none (and closes the one it names)


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: wraps to 1 (0 means "new session"), -1 stays -1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 0x7FFFFFFF else epoch + 1
