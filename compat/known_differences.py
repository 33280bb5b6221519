"""Differences between kbroker and Apache Kafka that are known and explained: not yet fixed, or
deliberate where Kafka's own answer is a bug (each entry says which).

One place, like ``normalise.py``: each entry names a (scenario, client) pair and says why the
outcomes differ. The parity test still runs such a pair and requires the difference to still
be there, so a fix shows up as a failure asking for the entry to be removed. Every entry is
listed in the issue notes; nothing here hides a difference from ``compat/REPORT.md``.
"""

from __future__ import annotations

_EXCESSIVE_GROWTH = (
    "Deliberate: Kafka 4.3.1 answers a CreatePartitions adding more than 10,000 partitions with "
    "UNKNOWN_SERVER_ERROR ('Unknown broker error'), validate-only or not, and when not validate-only it "
    "grows the topic anyway (10,002 asked: 10,001 partitions afterwards; its bounded record list "
    "overflows after the records are taken). kbroker refuses the request whole with POLICY_VIOLATION "
    "('Unable to perform excessively large batch operation.', Kafka's own answer to an oversized "
    "batch elsewhere) and changes nothing."
)

_TLS_ALERT = (
    "Not fixable with Python's ssl: a client certificate refused on an mTLS listener gets a TLS alert on "
    "both brokers, at once, but not the same alert. Kafka's JSSE sends bad_certificate (42) for a missing "
    "certificate and certificate_unknown (46) or bad_certificate (42) for one from an untrusted CA (it "
    "varies by client); kbroker's OpenSSL sends certificate_required (116) and unknown_ca (48), which "
    "name the cause. Choosing the alert needs a certificate-verify callback, which Python's ssl module "
    "does not offer; clients report both as a certificate failure and stop retrying."
)

KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {
    **{(scenario, client): _TLS_ALERT
       for scenario in ("security/untrusted-certificate", "security/missing-certificate")
       for client in ("kafka-python", "confluent", "kcat", "java-cli")},
    **{("admin/create-partitions-excessive", client): _EXCESSIVE_GROWTH
       for client in ("kafka-python", "aiokafka", "confluent", "java", "java-cli", "franz-go")},
}
