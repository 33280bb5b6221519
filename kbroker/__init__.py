"""kbroker: a Kafka-wire-compatible message broker (server, handlers, config, CLI).

Subpackages: ``kbroker.protocol`` (wire codec), ``kbroker.storage`` (logs),
``kbroker.replication`` (partitions and controller), ``kbroker.handlers`` (one module per API).
"""

__version__ = "0.1.0"
