"""Configuration: Kafka's server.properties keys and their validation (``kafka_config``), and the
config resources DescribeConfigs/AlterConfigs speak of (``config_resources``)."""
