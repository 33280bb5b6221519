"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-599): which quota applies to a request's user and
client id, the windowed rates Kafka measures them with, and the throttle time a client is told
(``throttle_time_ms``) and muted for (KIP-219)."""
