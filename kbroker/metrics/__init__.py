"""Kafka's JMX metrics under the names the Prometheus JMX exporter's Kafka example config gives
them (``kafka_server_brokertopicmetrics_messagesin_total{topic=...}``, ...), kafka_exporter's
consumer-group lag, kbroker's own (``kbroker_*``) and clients' KIP-714 metrics, for ``/metrics``.

Counting on the request path is a few integer additions per request or per partition (record
counts come from batch headers, never from records); everything else is read from the node's
state when Prometheus scrapes.
"""
