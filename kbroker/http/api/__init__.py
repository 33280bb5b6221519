"""The JSON read API the web console reads (``/api/...``), and its two write actions.

Everything is read in process from the node's own parts, at request time: what this broker
knows. The cluster's brokers, topics, partition registrations (leader, replicas, ISR, ELR) and
configs come from the replayed metadata image, the same on every broker; offsets, sizes and
messages from the replicas this broker holds (with replication factor 3 on three brokers, all of
them); consumer groups' members and lag from the group coordinator on this broker (each broker
coordinates the groups whose ``__consumer_offsets`` partition it leads), and the other brokers'
groups by ListGroups over the inter-broker listener; the replication timeline from the
metadata log, read from the controller quorum over the Kafka protocol (kbroker/http/api/timeline.py).
"""
