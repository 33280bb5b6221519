"""Reading a broker's answers: their error codes, and what an accepted request may change on disk.

``answer_codes`` walks a response frame by the schema of the API and version the request
header named (an ApiVersions request of a version the broker does not serve is answered in
v0, KIP-511) and returns every error code in it, at any depth; a frame that does not follow
the schema raises ``LayoutError``. It reads structure only, as a client's parser would, so a
value kio's decoder refuses (a -1 timestamp) is no finding. ``decode_answer`` decodes with kio
when the values matter. ``Effects`` collects, from
requests answered with error 0, what the disk invariant must allow: partitions written
(Produce), topics created or deleted, partitions added, and topics "opened" — those whose logs
the broker may now change on its own schedule (configs altered, records deleted, transaction
markers, transactional writes).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field, fields, is_dataclass
from functools import cache
from typing import Any

from kbroker.protocol.codec import (
    API_VERSIONS_KEY,
    decode_request_body,
    decode_response,
    is_flexible,
    parse_request_header,
    request_schema,
)

from compat.fuzz.layout import ERROR_CODE, walk_response

PRODUCE, CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 0, 19, 20, 37
UNSUPPORTED_VERSION = 35
# APIs whose accepted topics may change later without another request (see ``Effects.opened``).
OPENING_APIS = frozenset({
    21,  # DeleteRecords: segments below the new log start offset are deleted
    24,  # AddPartitionsToTxn: markers are written when the transaction ends or times out
    27,  # WriteTxnMarkers
    33, 44,  # AlterConfigs, IncrementalAlterConfigs: retention, compaction, segment rolls
})  # fmt: skip
NAME_FIELDS = ("name", "topic", "topic_name", "resource_name")


def _answered_version(api_key: int, api_version: int, frame: bytes) -> int:
    if api_key == API_VERSIONS_KEY and len(frame) >= 6 and struct.unpack_from(">h", frame, 4)[0] == UNSUPPORTED_VERSION:
        return 0
    return api_version


def answer_codes(api_key: int, api_version: int, frame: bytes) -> list[int]:
    """Every error code in a response frame (no size prefix); LayoutError if it is malformed."""
    layout = walk_response(api_key, _answered_version(api_key, api_version, frame), frame)
    return [span.value for span in layout.of_kind(ERROR_CODE)]


def decode_answer(api_key: int, api_version: int, frame: bytes) -> Any:
    """The kio response entity of a response frame (no size prefix)."""
    return decode_response(api_key, _answered_version(api_key, api_version, frame), frame)[1]


def decode_request(frame: bytes) -> Any | None:
    """The request entity of a frame (no size prefix), or None if it does not decode."""
    try:
        api_key, api_version = struct.unpack_from(">hh", frame, 0)
        schema = request_schema(api_key, api_version)
        if schema is None:
            return None
        view = memoryview(bytearray(frame))
        _header, offset = parse_request_header(view, is_flexible(api_key, api_version))
        return decode_request_body(schema, view, offset)
    except Exception:  # any undecodable frame: the caller only wants what a decodable one says
        return None


@cache
def _shape(entity_type: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(error code field names, nested entity or tuple field names) of a kio entity class."""
    codes, nested = [], []
    for f in fields(entity_type):
        if f.metadata.get("kafka_type") == "error_code":
            codes.append(f.name)
        elif "kafka_type" not in f.metadata:  # entities and arrays of entities carry no kafka_type
            nested.append(f.name)
    return tuple(codes), tuple(nested)


def _children(entity: Any, name: str) -> list[Any]:
    value = getattr(entity, name)
    if value is None:
        return []
    if isinstance(value, tuple):
        return [v for v in value if is_dataclass(v)]
    return [value] if is_dataclass(value) else []


def error_codes(entity: Any) -> list[int]:
    """Every error code in ``entity`` and below it."""
    codes, nested = _shape(type(entity))
    out = [int(getattr(entity, c)) for c in codes]
    for name in nested:
        for child in _children(entity, name):
            out += error_codes(child)
    return out


def named_results(entity: Any) -> list[tuple[str, list[int]]]:
    """(topic or resource name, the error codes below it) for each named entity in a response."""
    out = []
    name = next((getattr(entity, f) for f in NAME_FIELDS if isinstance(getattr(entity, f, None), str)), None)
    if name is not None:
        out.append((name, error_codes(entity)))
    _codes, nested = _shape(type(entity))
    for child_field in nested:
        for child in _children(entity, child_field):
            out += named_results(child)
    return out


@dataclass
class Effects:
    """What accepted requests allow to change on disk. ``written`` holds for the batch it was
    answered in; the other sets hold for the rest of the run."""

    written: set[tuple[str, int]] = field(default_factory=set)
    created_topics: set[str] = field(default_factory=set)
    grown_topics: set[str] = field(default_factory=set)  # partitions added
    deleted_topics: set[str] = field(default_factory=set)
    deleted_ids: set[uuid.UUID] = field(default_factory=set)
    opened: set[str] = field(default_factory=set)

    def note(self, request: Any, response: Any, topic_names: dict[uuid.UUID, str]) -> None:
        """Record what an answered request accepted (``request`` None: it did not decode here)."""
        api_key = int(type(response).__api_key__)
        validate_only = bool(getattr(request, "validate_only", False))
        if api_key == PRODUCE:
            transactional = request is None or request.transactional_id is not None
            for topic in response.responses:
                name = topic.name if getattr(topic, "name", None) else topic_names.get(getattr(topic, "topic_id", None))
                for partition in topic.partition_responses:
                    if name is not None and partition.error_code == 0:
                        self.written.add((name, int(partition.index)))
                        if transactional:
                            self.opened.add(name)
            return
        if api_key == DELETE_TOPICS:
            for result in response.responses:
                if result.error_code != 0:
                    continue
                if getattr(result, "name", None):
                    self.deleted_topics.add(result.name)
                if getattr(result, "topic_id", None) is not None:
                    self.deleted_ids.add(result.topic_id)
            return
        accepted = [name for name, codes in named_results(response) if codes and all(c == 0 for c in codes)]
        if api_key == CREATE_TOPICS and not validate_only:
            self.created_topics.update(accepted)
        elif api_key == CREATE_PARTITIONS and not validate_only:
            self.grown_topics.update(accepted)
        elif api_key in OPENING_APIS and not validate_only:
            self.opened.update(accepted)

    def note_unanswered_produce(self, request: Any, topic_names: dict[uuid.UUID, str]) -> None:
        """An acks=0 Produce the broker processed without answering: anything it named may be written."""
        for topic in request.topic_data:
            name = getattr(topic, "name", None) or topic_names.get(getattr(topic, "topic_id", None))
            if name is None:
                continue
            for partition in topic.partition_data:
                self.written.add((name, int(partition.index)))
            if request.transactional_id is not None:
                self.opened.add(name)
