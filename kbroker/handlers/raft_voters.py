"""What AddRaftVoter and RemoveRaftVoter share: the answer of a quorum with static voters.

kbroker's controller quorum is static (``controller.quorum.voters``, kraft.version 0), so a
voter can be neither added nor removed. Kafka checks a request in this order, and kbroker
answers each step as it does: a cluster id that is not this cluster's is
INCONSISTENT_CLUSTER_ID; a voter without an id or a directory id is INVALID_REQUEST; otherwise, with
kraft.version 0, UNSUPPORTED_VERSION "Cluster doesn't support <adding|removing> voter because
the kraft.version feature is 0".
"""

from __future__ import annotations

import uuid

from kbroker.protocol.errors import ErrorCode, KafkaError

NO_DIRECTORY = uuid.UUID(int=0)


def refusal(request: object, cluster_id: str | None, verb: str, noun: str) -> KafkaError:
    """Why the quorum refuses to <verb> (adding / removing) a voter; ``noun`` names the request."""
    asked = getattr(request, "cluster_id", None)
    if asked is not None and cluster_id is not None and asked != cluster_id:
        return KafkaError(ErrorCode.inconsistent_cluster_id,
                          f'The given id "{asked}" doesn\'t match the cluster id "{cluster_id}"')
    if request.voter_id < 0 or request.voter_directory_id in (None, NO_DIRECTORY):  # kio reads the zero id as None
        return KafkaError(ErrorCode.invalid_request, f"{noun} request didn't include a valid voter")
    return KafkaError(ErrorCode.unsupported_version,
                      f"Cluster doesn't support {verb} voter because the kraft.version feature is 0")
