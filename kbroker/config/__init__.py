"""Configuration: Kafka's server.properties keys and their validation (``kafka_config``), the
builders of the typed settings the composition roots hand to the parts below them
(``settings``), and the config resources DescribeConfigs/AlterConfigs speak of
(``config_resources``)."""
