"""Side-by-side benchmarks of kbroker and Apache Kafka 4.3.1 (``python -m compat.bench``; see README.md)."""
