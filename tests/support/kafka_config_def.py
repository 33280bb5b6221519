"""Kafka 4.3.1's broker ConfigDef, asked at test time from its jars (not a double: Kafka's own
classes answer). ``KafkaBrokerConfigDef.java`` beside this module runs as a single source file."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from compat.deps import kafka_classpath

SOURCE = Path(__file__).with_name("KafkaBrokerConfigDef.java")


def _run(*args: str, stdin: str | None = None) -> Any:
    java = shutil.which("java")
    assert java is not None, "the Kafka ConfigDef checks need a Java 17+ runtime on PATH"
    result = subprocess.run([java, "-cp", kafka_classpath(), str(SOURCE), *args], input=stdin,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def kafka_broker_keys() -> list[dict[str, Any]]:
    """Every key of Kafka's broker ConfigDef: name, type, default, has_default, validator,
    importance, internal, dynamic (update mode or None), synonyms."""
    return _run("dump")


def kafka_checks(pairs: list[tuple[str, str]]) -> list[str | None]:
    """Kafka's answer to each (key, value): None when its parser and validator accept it, else
    the ConfigException message."""
    return _run("check", stdin=json.dumps([list(pair) for pair in pairs]))
