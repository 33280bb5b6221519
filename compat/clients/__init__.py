"""Client stacks the compat scenarios run with, one adapter class each (see ``base.Client``).

``CLIENTS`` maps the name used in test ids and the report to the adapter class; the order
is the order items run and columns appear in the report.
"""

from __future__ import annotations

from compat.clients.aiokafka_client import AiokafkaClient
from compat.clients.base import Client
from compat.clients.confluent import ConfluentClient
from compat.clients.franz_go import FranzGoClient
from compat.clients.java import JavaClient
from compat.clients.java_cli import JavaCliClient
from compat.clients.kafka_python import KafkaPythonClient
from compat.clients.kcat import KcatClient

CLIENTS: dict[str, type[Client]] = {
    cls.name: cls
    for cls in (KafkaPythonClient, AiokafkaClient, ConfluentClient, KcatClient, JavaClient, JavaCliClient,
                FranzGoClient)
}
