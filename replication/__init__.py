"""Replication: the data plane of a partition and, in ``quorum/``, the control plane.

Installed as ``kbroker.replication``; depends on ``kbroker.storage`` and ``kbroker.protocol``.
Here at the root: a replica of a partition (``Partition``: ISR, high watermark, waiting
produce/fetch), the ``ReplicaManager`` that holds this broker's replicas, follower fetchers, and
the broker's read side of the catalogue (``ForwardingController``, what Kafka calls the metadata
cache). Every decision about replicas — who leads, who is in sync, which topics exist — is made
by the control plane in ``quorum/`` and reaches the data plane as metadata records.
"""
