"""Cluster membership: how a broker and the controller quorum find and follow each other.

``broker_lifecycle`` registers the broker, heartbeats and replays the metadata log into the
broker's image; ``controller_channel`` carries a broker's requests to the active controller (over
the network, or in process on a combined node); ``quorum_driver`` runs a voter's Raft core over
sockets and timers.
"""
