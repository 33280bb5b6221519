"""Compatibility harness: what kbroker's tests need from the outside world to check kbroker
against real Kafka tooling (Apache Kafka's own jars and CLI tools, kcat)."""
