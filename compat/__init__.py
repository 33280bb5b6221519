"""Compatibility harness: kbroker checked against real Apache Kafka and real Kafka tooling.

``deps`` fetches Apache Kafka's jars and kcat; ``targets`` starts a real Kafka 4.3.1 node or a
kbroker node behind one interface; ``clients/`` adapts each client stack (kafka-python,
aiokafka, confluent-kafka, kcat, Java clients, Kafka's CLI tools) to one small API;
``scenarios/`` are the behaviour-parity scenarios, run by ``test_compat.py`` against both
targets and compared after ``normalise``; ``python -m compat report`` writes REPORT.md.
``bench/``, ``quick_throughput`` and ``codec_costs`` measure performance.
"""
