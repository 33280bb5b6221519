"""Kafka's security model: who a connection is (principals from TLS certificates and SASL), what
it may do (the ACL authorizer) and how much (client quotas)."""
