"""The row layout of the broker key tables (``broker_keys_core``, ``broker_keys_plugins``): a
tuple per key, with short names for the types and the dynamic-update modes so a row fits a line.
"""

from __future__ import annotations

from kbroker.storage.log_config import ConfigType

# (name, type, default, validator, importance, dynamic update mode, description)
Row = tuple[str, ConfigType, str | None, str | None, str, str | None, str]

B, S, I, SH, L, D, LS, C, P = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT,  # noqa: E741
                               ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST, ConfigType.CLASS,
                               ConfigType.PASSWORD)
RO, PB, CW = None, "per-broker", "cluster-wide"
