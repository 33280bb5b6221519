"""Test doubles of kbroker's own parts (never of Kafka): a clock moved by hand, in-memory stores."""
