"""Running in a container: KAFKA_* environment variables mapped to server.properties as the
apache/kafka image maps them, the entrypoint, and the readiness health check."""
