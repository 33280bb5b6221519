"""Composition roots: the objects a process is made of, wired together once.

``Broker`` assembles the log manager, replica manager, coordinators and catalogue of a broker;
``ControllerNode`` the metadata log, Raft quorum and QuorumController of a voter. A combined node
runs one of each in the same process. Node-wide resources (``meta.properties``, the open-file
limit) are set up here too.
"""
