"""Partition state, high watermark, waiting produce/fetch, and the controller's metadata.

Installed as ``kbroker.replication``. Depends on ``kbroker.storage`` and ``kbroker.protocol``.
A single node is its own controller and the only replica of every partition; the replicated
cluster builds on the same Partition and Controller types.
"""
