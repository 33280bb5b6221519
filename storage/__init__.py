"""Partition storage: segmented logs, sparse indexes, epoch cache, checkpoints, recovery.

Installed as ``kbroker.storage``. Depends only on ``kbroker.protocol``.
"""
