"""The control plane: the metadata log replicated by a Raft quorum, and the controller on it.

``raft`` is the sans-IO Raft core (KRaft's Vote/BeginQuorumEpoch/EndQuorumEpoch/Fetch) over a
``raft_log``; ``raft_wire`` and ``raft_messages`` are its messages and their Kafka encoding.
``quorum_controller`` is the active controller: it decides (topics, partition leaders and ISR,
broker registrations and fencing, configs, producer id blocks, reassignments) and writes each
decision as metadata records (typed, with their on-disk JSON, in ``metadata_records``);
``metadata_image`` is the state those records build, the same on every voter and broker. A
single node runs this with one voter, as Kafka 4 does. The network and disk I/O around the core
live in ``kbroker.cluster``.
"""
