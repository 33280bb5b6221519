"""Kafka wire protocol: framing, message codec, record batches, compression and error codes.

Installed as ``kbroker.protocol``. This package does no I/O; the server feeds it bytes.
"""
