"""Differences between kbroker and Apache Kafka that are known, explained, and not yet fixed.

One place, like ``normalise.py``: each entry names a (scenario, client) pair and says why the
outcomes differ. The parity test still runs such a pair and requires the difference to still
be there, so a fix shows up as a failure asking for the entry to be removed. Every entry is
listed in the issue notes; nothing here hides a difference from ``compat/REPORT.md``.
"""

from __future__ import annotations

_BROKER_KEYS = (
    "Kafka 4.3 describes every broker config key it has (~138 for broker 1); kbroker describes "
    "only the keys it knows (kbroker/config.py BROKER_CONFIGS)."
)

KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {
    ("configs/broker-all-names", "kafka-python"): _BROKER_KEYS,
    ("configs/broker-all-names", "java"): _BROKER_KEYS,
}
