"""Random well-formed requests for any API key and version kbroker serves, built from kio's schemas.

``RequestGenerator.frame(key, version)`` walks the kio request class field by field and draws
each value from what the field means in Kafka: topic names from the world's topics (routed by
API, so a generated AlterConfigs lands on ``fz-admin`` and a WriteTxnMarkers on ``fz-txn``),
topic ids that the runner later swaps for the target's own, partitions 0-3, the node id 1,
small timeouts (a generated Fetch must not park a worker for minutes), real topic config keys,
consumer-protocol subscriptions, and record batches in every compression codec. A few percent
of the numbers are the type's extremes instead. The result is encoded with kio's writers, so it
is a frame a correct client could send; the mutators then break it. Everything is drawn from
the ``random.Random`` passed in: the same seed gives the same frames.

This is a deterministic stand-in for ``hypothesis.strategies.from_type`` (which
``tests/protocol/test_codec_fuzz.py`` uses): those strategies draw values without meaning, so
almost every generated request would stop at UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import datetime
import random
import struct
import uuid
from collections.abc import Mapping
from dataclasses import MISSING, Field, fields
from typing import Any, get_args

import cramjam
from kbroker.protocol.codec import encode_request, request_schema
from kbroker.protocol.record_builder import build_batch, encode_record
from kio.schema.types import GroupId, TopicName, TransactionalId
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field, is_optional

from compat.fuzz import world

# API keys whose requests change a topic's configuration or records outside plain appends.
ADMIN_APIS = frozenset({21, 33, 37, 44})  # DeleteRecords, AlterConfigs, CreatePartitions, IncrementalAlterConfigs
TXN_APIS = frozenset({24, 26, 27, 28})  # AddPartitionsToTxn, EndTxn, WriteTxnMarkers, TxnOffsetCommit
CREATE_DELETE_APIS = frozenset({19, 20})  # CreateTopics, DeleteTopics
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4

CONFIG_KEYS = [
    "cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes", "segment.ms", "max.message.bytes",
    "min.insync.replicas", "message.timestamp.type", "compression.type", "delete.retention.ms",
    "min.cleanable.dirty.ratio", "unclean.leader.election.enable", "log.retention.ms", "no.such.config",
]  # fmt: skip
CONFIG_VALUES = ["compact", "delete", "compact,delete", "-1", "0", "1", "1000", "86400000", "LogAppendTime",
                 "zstd", "true", "0.5", "", "not-a-number", "9223372036854775807"]  # fmt: skip
ASSIGNORS = ["range", "roundrobin", "cooperative-sticky", "uniform"]
BOUNDARIES = {1: (-(2**7), 2**7 - 1), 2: (-(2**15), 2**15 - 1), 4: (-(2**31), 2**31 - 1), 8: (-(2**63), 2**63 - 1)}
INT_WIDTH = {"int8": 1, "int16": 2, "int32": 4, "int64": 8}
EXTREME_CHANCE = 0.03


def consumer_subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: the JoinGroup protocol metadata of a consumer."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)  # no user data


def consumer_assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: what a SyncGroup leader hands each member."""
    out = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


COMPRESSORS = {
    1: lambda b: bytes(cramjam.gzip.compress(b)),
    2: lambda b: bytes(cramjam.snappy.compress_raw(b)),
    3: lambda b: bytes(cramjam.lz4.compress(b)),
    4: lambda b: bytes(cramjam.zstd.compress(b)),
}


def record_batch(rng: random.Random, *, codec: int, producer_id: int = -1, producer_epoch: int = -1,
                 transactional: bool = False) -> bytes:
    """One magic-v2 batch of 1-4 small keyed records, compressed with ``codec`` (0-4)."""
    records = [(f"k{rng.randrange(100)}".encode(), bytes(rng.randrange(256) for _ in range(rng.randrange(40))))
               for _ in range(rng.randint(1, 4))]
    now_ms = 1_700_000_000_000 + rng.randrange(10**9)
    attributes = codec | (0x10 if transactional else 0)
    compressed = None
    if codec:
        body = b"".join(encode_record(i, i, key, value) for i, (key, value) in enumerate(records))
        compressed = COMPRESSORS[codec](body)
    sequence = 0 if producer_id >= 0 else -1
    return build_batch(records, base_timestamp=now_ms, attributes=attributes, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=sequence, compressed_records=compressed)


class RequestGenerator:
    """Draws well-formed requests; ``topic_ids`` are the ids recorded for the world's topics."""

    def __init__(self, rng: random.Random, topic_ids: Mapping[str, uuid.UUID]) -> None:
        self.rng = rng
        self.topic_ids = dict(topic_ids)
        self.topic = world.DATA.name
        self.transactional = False

    def frame(self, api_key: int, api_version: int) -> bytes:
        """A request frame (header and body, no size prefix)."""
        schema = request_schema(api_key, api_version)
        if schema is None:
            raise ValueError(f"kio has no request for API {api_key} v{api_version}")
        self.topic = self._topic_for(api_key)
        self.transactional = api_key in TXN_APIS or (api_key == 0 and self.rng.random() < 0.2)
        if api_key == 0 and self.transactional:
            self.topic = world.TXN.name
        body = self._entity(schema)
        correlation_id = self.rng.randrange(2**31)
        return encode_request(api_key, api_version, correlation_id, world.CLIENT_ID, body)[4:]

    def _topic_for(self, api_key: int) -> str:
        if api_key in ADMIN_APIS:
            return world.ADMIN.name
        if api_key in TXN_APIS:
            return world.TXN.name
        if api_key in CREATE_DELETE_APIS:
            return f"{world.NEW_TOPIC_PREFIX}gen-{self.rng.randrange(4)}"
        roll = self.rng.random()
        if roll < 0.7:
            return world.DATA.name
        if roll < 0.9:
            return world.COMPACT.name
        return f"fz-unknown-{self.rng.randrange(100)}"

    # --- structure ---------------------------------------------------------------------------

    def _entity(self, entity_type: type) -> Any:
        values = {}
        for field in fields(entity_type):
            if field.metadata.get("tag") is not None and self.rng.random() < 0.7:
                values[field.name] = self._tag_default(field)
            else:
                values[field.name] = self._field(entity_type, field)
        return entity_type(**values)

    @staticmethod
    def _tag_default(field: Field[Any]) -> Any:
        if field.default is not MISSING:
            return field.default
        if field.default_factory is not MISSING:
            return field.default_factory()
        return get_tagged_field_default(field)

    def _field(self, parent: type, field: Field[Any]) -> Any:
        kind = classify_field(field)
        nullable = is_optional(field) and field.metadata.get("tag") is None
        if isinstance(kind, EntityTupleField):
            if nullable and self.rng.random() < 0.1:
                return None
            count = self.rng.choices([0, 1, 2, 3], weights=[1, 6, 2, 1])[0]
            return tuple(self._entity(kind.type_) for _ in range(count))
        if isinstance(kind, EntityField):
            if nullable and self.rng.random() < 0.2:
                return None
            return self._entity(kind.type_)
        if isinstance(kind, PrimitiveTupleField):
            if nullable and self.rng.random() < 0.1:
                return None
            return self._primitive_array(parent, field)
        return self._primitive(parent, field, nullable)

    # --- values ------------------------------------------------------------------------------

    def _primitive_array(self, parent: type, field: Field[Any]) -> tuple[Any, ...]:
        name = field.name
        rng = self.rng
        if name in ("partitions", "partition_indexes"):
            return tuple(rng.sample(range(4), rng.randint(0, 3)))
        if name in ("broker_ids", "replicas"):
            return rng.choice([(1,), (1,), (), (2,), (1, 1)])
        if name in ("group_ids", "groups", "groups_names"):
            return (f"{world.GROUP_PREFIX}gen",)
        if name == "transactional_ids":
            return (f"{world.TRANSACTIONAL_ID_PREFIX}gen",)
        if name == "coordinator_keys":
            return (rng.choice([f"{world.GROUP_PREFIX}gen", f"{world.TRANSACTIONAL_ID_PREFIX}gen"]),)
        if name in ("topic_names", "subscribed_topic_names"):
            return (self.topic,)
        if name == "configuration_keys":
            return tuple(rng.sample(CONFIG_KEYS, rng.randint(0, 2)))
        if name in ("state_filters", "states_filter"):
            return tuple(rng.sample(["Stable", "Empty", "Ongoing", "PreparingRebalance", "Dead"], rng.randint(0, 2)))
        if name == "types_filter":
            return tuple(rng.sample(["classic", "consumer"], rng.randint(0, 2)))
        if name == "producer_id_filters":
            return tuple(rng.randrange(-1, 3) for _ in range(rng.randint(0, 2)))
        kafka_type = field.metadata["kafka_type"]
        if kafka_type in INT_WIDTH:
            return tuple(self._int(name, INT_WIDTH[kafka_type]) for _ in range(rng.randint(0, 3)))
        return tuple(self._string(parent, name, field.type) for _ in range(rng.randint(0, 2)))

    def _primitive(self, parent: type, field: Field[Any], nullable: bool) -> Any:
        kafka_type = field.metadata["kafka_type"]
        name = field.name
        rng = self.rng
        if kafka_type == "bool":
            return rng.random() < (0.1 if name == "allow_auto_topic_creation" else 0.5)
        if kafka_type in INT_WIDTH:
            return self._int(name, INT_WIDTH[kafka_type])
        if kafka_type == "timedelta_i32":
            return datetime.timedelta(milliseconds=self._duration_ms(name))
        if kafka_type == "timedelta_i64":
            return datetime.timedelta(milliseconds=rng.choice([-1, 0, 60_000, 86_400_000]))
        if kafka_type == "uuid":
            return self._uuid(nullable)
        if kafka_type == "uint16":  # a raft voter's listener port
            return rng.choice([0, 9093, 65535])
        if kafka_type == "float64":  # client quota values
            return rng.choice([0.0, 1024.0, -1.0, 1e12, float("inf")])
        if kafka_type == "records":
            return self._records(nullable)
        if kafka_type == "bytes":
            if name == "metadata":
                return consumer_subscription([self.topic])
            if name == "assignment":
                return consumer_assignment(self.topic, [0, 1, 2]) if rng.random() < 0.7 else b""
            return bytes(rng.randrange(256) for _ in range(rng.randrange(16)))
        if nullable and (rng.random() < 0.1 or (name == "transactional_id" and not self.transactional)):
            return None  # a null transactional id: a plain (idempotent or not) producer
        return self._string(parent, name, field.type)

    def _int(self, name: str, width: int) -> int:
        rng = self.rng
        if rng.random() < EXTREME_CHANCE:
            low, high = BOUNDARIES[width]
            return rng.choice([low, high, -1, 0])
        if name in ("partition", "partition_index", "index"):
            return rng.choice([0, 0, 0, 1, 2, 3, -1])  # fz-data has 0-2, the other topics only 0
        if name in ("replica_id", "broker_id"):
            return rng.choice([-1, -1, 1, 0])
        if name == "acks":
            return rng.choice([-1, -1, 1, 0])
        if name == "num_partitions":
            return rng.choice([1, 2, 3, -1])
        if name == "count":
            return rng.choice([2, 3, 4])
        if name == "replication_factor":
            return rng.choice([1, 1, -1, 2])
        if name in ("producer_id", "v3_and_below_producer_id"):
            return rng.choice([-1, -1, 0, 1000])
        if name.endswith("epoch") or name.startswith("generation_id"):
            return rng.choice([-1, 0, 0, 1])
        if name in ("fetch_offset", "offset", "committed_offset", "log_start_offset"):
            return rng.choice([-1, 0, 0, 1, 5, 100])
        if name == "timestamp":
            return rng.choice([-2, -1, -3, 0, 1_700_000_000_000])
        if name in ("max_bytes", "min_bytes", "partition_max_bytes"):
            return rng.choice([1, 1024, 1 << 20])
        if name == "session_id":
            return 0
        if name == "resource_type":
            return TOPIC_RESOURCE if rng.random() < 0.8 else BROKER_RESOURCE
        if name == "config_operation":
            return rng.randrange(4)
        if name in ("isolation_level", "election_type", "key_type"):
            return rng.randrange(2)
        if name == "endpoint_type":
            return rng.choice([1, 2])
        if name == "transaction_version":
            return rng.randrange(3)
        if name == "duration_filter":
            return -1
        if name == "response_partition_limit":
            return rng.choice([1, 2000])
        return rng.choice([0, 1, -1, rng.randrange(100)])

    def _duration_ms(self, name: str) -> int:
        rng = self.rng
        if rng.random() < EXTREME_CHANCE:
            return rng.choice([-1, 0, 2**31 - 1])
        if name == "max_wait":
            return rng.randrange(0, 500)
        if name == "session_timeout":
            return rng.randrange(6_000, 30_000)
        if name == "rebalance_timeout":
            return rng.randrange(1_000, 10_000)
        if name == "transaction_timeout":
            return rng.randrange(1_000, 60_000)
        return rng.randrange(0, 5_000)

    def _uuid(self, nullable: bool) -> uuid.UUID | None:
        roll = self.rng.random()
        if roll < 0.8 and self.topic in self.topic_ids:
            return self.topic_ids[self.topic]
        if roll < 0.9:
            return None if nullable else uuid.UUID(int=0)
        return uuid.UUID(int=self.rng.getrandbits(128))

    def _records(self, nullable: bool) -> bytes | None:
        rng = self.rng
        if nullable and rng.random() < 0.05:
            return None
        producer_id, epoch = (rng.choice([0, 1000]), 0) if self.transactional or rng.random() < 0.3 else (-1, -1)
        return b"".join(
            record_batch(rng, codec=rng.randrange(5), producer_id=producer_id, producer_epoch=epoch,
                         transactional=self.transactional)
            for _ in range(rng.choices([1, 2], weights=[4, 1])[0])
        )

    def _string(self, parent: type, name: str, annotated: Any) -> str:
        rng = self.rng
        types = set(get_args(annotated)) | {annotated}
        group = f"{world.GROUP_PREFIX}gen"
        transactional_id = f"{world.TRANSACTIONAL_ID_PREFIX}gen"
        if TopicName in types or name in ("topic", "topic_name", "resource_name"):
            return self.topic if rng.random() < 0.95 else f"fz-{rng.randrange(1000)}"
        if GroupId in types or name == "group_id":
            return group
        if TransactionalId in types or name in ("transactional_id", "v3_and_below_transactional_id"):
            return transactional_id
        if name == "key":
            return rng.choice([group, transactional_id])
        if name == "member_id":
            return rng.choice(["", "", f"fz-member-{rng.randrange(10)}"])
        if name in ("group_instance_id", "instance_id"):
            return f"fz-instance-{rng.randrange(3)}"
        if name == "protocol_type":
            return "consumer"
        if name in ("protocol_name", "server_assignor") or (name == "name" and "Protocol" in parent.__name__):
            return rng.choice(ASSIGNORS)
        if name == "name" and "Config" in parent.__name__:
            return rng.choice(CONFIG_KEYS)
        if name == "value":
            return rng.choice(CONFIG_VALUES)
        if name == "subscribed_topic_regex":
            return "fz-.*"
        if name == "transactional_id_pattern":
            return "fz-tx-.*"
        if name in ("client_software_name", "client_software_version"):
            return rng.choice(["fz", "1.0", "bad name!"])
        if name == "rack_id":
            return ""
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz-._") for _ in range(rng.randrange(1, 12)))
