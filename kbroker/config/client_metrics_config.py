"""Client metrics subscriptions: the keys a CLIENT_METRICS config resource (type 16) holds.

KIP-714: an operator names a subscription (``kafka-client-metrics --alter --name s``) and sets
``metrics`` (metric name prefixes, ``*`` for all), ``interval.ms`` (push interval) and
``match`` (client selectors such as ``client_id=app-.*``). kbroker stores them as Kafka does, as
ConfigRecords in the metadata log (resource type 16, name = the subscription), where the
telemetry push (GetTelemetrySubscriptions / PushTelemetry) will read them. Validation and messages are
Kafka's ClientMetricsConfigs': an unknown key or an interval outside [100, 3600000] is
INVALID_REQUEST, a malformed value, an empty list item or an illegal match pattern
INVALID_CONFIG; duplicated list items are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kbroker.config.group_config import parse_int
from kbroker.protocol.errors import ErrorCode, KafkaError
from kbroker.storage.log_config import ConfigEntry, ConfigSource, ConfigType

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
# key -> (type, default as DescribeConfigs shows it)
CLIENT_METRICS_CONFIGS: dict[str, tuple[ConfigType, str]] = {
    INTERVAL_MS: (ConfigType.INT, "300000"),
    MATCH: (ConfigType.LIST, ""),
    METRICS: (ConfigType.LIST, ""),
}
MATCH_SELECTORS = frozenset({"client_instance_id", "client_id", "client_software_name", "client_software_version",
                             "client_source_address", "client_source_port"})  # fmt: skip
_MIN_INTERVAL_MS, _MAX_INTERVAL_MS = 100, 3_600_000


def split_list(value: str) -> list[str]:
    """A LIST value as Kafka's ConfigDef parses it: trimmed, split on commas with any spaces
    around, duplicates dropped (Kafka logs a warning and keeps the first of each)."""
    text = value.strip()
    return list(dict.fromkeys(re.split(r"\s*,\s*", text))) if text else []


def _check_list(key: str, value: str) -> list[str]:
    items = split_list(value)
    if any(item == "" for item in items):
        raise KafkaError(ErrorCode.invalid_config, f"Configuration '{key}' values must not be empty.")
    return items


def parse_match(patterns: list[str]) -> dict[str, re.Pattern[str]]:
    """``selector=regex`` patterns by selector; INVALID_CONFIG for an illegal one."""
    out: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        parts = pattern.split("=")
        # Java's split drops trailing empty strings: "client_id=" has one part.
        while len(parts) > 1 and parts[-1] == "":
            parts.pop()
        selector = parts[0].strip() if len(parts) == 2 else ""
        if selector not in MATCH_SELECTORS:
            raise KafkaError(ErrorCode.invalid_config, f"Illegal client matching pattern: {pattern}")
        try:
            out[selector] = re.compile(parts[1].strip())
        except re.error:
            raise KafkaError(ErrorCode.invalid_config, f"Illegal client matching pattern: {pattern}") from None
    return out


def validate_client_metrics(name: str, configs: Mapping[str, str]) -> None:
    """Raise KafkaError (Kafka's code and message) unless ``configs`` — the subscription's whole
    config after a change — is a valid subscription ``name``."""
    if name == "":
        raise KafkaError(ErrorCode.invalid_request, "Subscription name can't be empty")
    for key in configs:
        if key not in CLIENT_METRICS_CONFIGS:
            raise KafkaError(ErrorCode.invalid_request, f"Unknown client metrics configuration: {key}")
    if METRICS in configs:
        _check_list(METRICS, configs[METRICS])
    interval = parse_int(INTERVAL_MS, configs[INTERVAL_MS], None) if INTERVAL_MS in configs else None
    match = _check_list(MATCH, configs[MATCH]) if MATCH in configs else None
    if interval is not None and not _MIN_INTERVAL_MS <= interval <= _MAX_INTERVAL_MS:
        raise KafkaError(ErrorCode.invalid_request, f"Invalid value {interval} for {INTERVAL_MS}, interval must be "
                         f"between {_MIN_INTERVAL_MS} and {_MAX_INTERVAL_MS} (1 hour)")
    if match is not None:
        parse_match(match)



def describe_client_metrics(name: str, stored: Mapping[str, str]) -> list[ConfigEntry]:
    """The three keys of subscription ``name``, sorted: its own value (source
    CLIENT_METRICS_CONFIG, with itself as synonym) or the default (no synonyms)."""
    if name == "":
        raise KafkaError(ErrorCode.invalid_request, "Client metrics subscription name must not be empty")
    entries = []
    for key, (kind, default) in sorted(CLIENT_METRICS_CONFIGS.items()):
        if key not in stored:
            entries.append(ConfigEntry(key, default, ConfigSource.DEFAULT_CONFIG, kind, "", ()))
            continue
        value = stored[key]
        # Kafka shows the parsed value: a list joined by commas, a number without padding.
        shown = ",".join(split_list(value)) if kind == ConfigType.LIST else str(int(value.strip()))
        source = ConfigSource.CLIENT_METRICS_CONFIG
        entries.append(ConfigEntry(key, shown, source, kind, "", ((key, shown, source),)))
    return entries
