"""What the client stacks driven through a driver process have in common (the Java client's
``CompatDriver`` JVM, the franz-go driver): every operation is one JSON-lines request to the
driver (``java_driver.py``), and these adapter methods only pass their arguments on. Bytes
travel base64-encoded.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from compat.clients.base import Client, GroupMember, Json, OffsetSpec, Rec, b64, record, unb64
from compat.clients.java_driver import JavaDriver


def wire(records: list[Rec]) -> list[dict[str, Any]]:
    return [
        {"key": b64(r.key), "value": b64(r.value), "partition": r.partition, "timestamp": r.timestamp,
         "headers": [[k, b64(v)] for k, v in r.headers]}
        for r in records
    ]  # fmt: skip



def records_of(raw: list[dict[str, Any]]) -> list[Json]:
    return [record(r["partition"], r["offset"], unb64(r["key"]), unb64(r["value"]),
                   [(k, unb64(v)) for k, v in r["headers"]], r["timestamp"], r["timestamp_type"])
            for r in raw]  # fmt: skip


HANDLES = itertools.count()  # names of the consumers and producers the driver keeps between requests

class DriverClient(Client):
    """A ``Client`` whose operations run in a driver process (``make_driver``)."""

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        super().__init__(bootstrap, workdir)
        self.driver = self.make_driver(workdir)

    def make_driver(self, workdir: Path) -> JavaDriver:
        raise NotImplementedError

    def close(self) -> None:
        self.driver.close()

    def reconnect(self) -> None:
        self.driver.close()  # a new driver process (and its clients) starts on the next request

    def _call(self, op: str, **args: Any) -> Any:
        return self.driver.call(op, bootstrap=self.bootstrap, **args)

    def create_topic(
        self, name: str, partitions: int = 1, rf: int = 1,
        configs: dict[str, str] | None = None, validate_only: bool = False,
    ) -> Json:  # fmt: skip
        return self._call("create_topic", name=name, partitions=partitions, rf=rf, configs=configs or {},
                          validate_only=validate_only)  # fmt: skip

    def delete_topic(self, name: str) -> Json:
        return self._call("delete_topic", name=name)

    def create_partitions(self, name: str, total: int, validate_only: bool = False) -> Json:
        return self._call("create_partitions", name=name, total=total, validate_only=validate_only)

    def describe_topic(self, name: str) -> Json:
        return self._call("describe_topic", name=name)

    def list_topics(self) -> Json:
        return self._call("list_topics")

    def describe_configs(
        self, kind: str, name: str, keys: list[str] | None = None, synonyms: bool = False
    ) -> Json:
        return self._call("describe_configs", type=kind, name=name, keys=keys, synonyms=synonyms)

    def alter_configs(self, topic: str, ops: list[tuple[str, str, str | None]]) -> Json:
        return self._call("alter_configs", topic=topic, ops=[list(o) for o in ops])

    def delete_records(self, topic: str, partition: int, before: int) -> Json:
        return self._call("delete_records", topic=topic, partition=partition, before=before)

    def list_offsets(self, topic: str, partition: int, spec: OffsetSpec, isolation: str | None = None) -> Json:
        return self._call("list_offsets", topic=topic, partition=partition, spec=spec, isolation=isolation)

    def describe_group(self, group: str) -> Json:
        return self._call("describe_group", group=group)

    def delete_group(self, group: str) -> Json:
        return self._call("delete_group", group=group)

    def group_offsets(self, group: str, topic: str, partitions: list[int]) -> Json:
        return self._call("group_offsets", group=group, topic=topic, partitions=partitions)

    def alter_group_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> Json:
        return self._call("alter_group_offsets", group=group, topic=topic,
                          offsets={str(p): o for p, o in offsets.items()})  # fmt: skip

    def delete_group_offsets(self, group: str, topic: str, partitions: list[int]) -> Json:
        return self._call("delete_group_offsets", group=group, topic=topic, partitions=partitions)

    def produce(
        self, topic: str, records: list[Rec], *, acks: str = "all", codec: str = "none",
        sync: bool = False, extra: dict[str, str] | None = None,
    ) -> Json:  # fmt: skip
        props = {"acks": acks, "compression.type": codec, **(extra or {})}
        return self._call("produce", topic=topic, records=wire(records), props=props, sync=sync)


class DriverMember(GroupMember):
    """A group member kept in the driver process under ``handle`` (set by the subclass, which
    opens it). One driver serves all members, so they poll in turn."""

    POLL_IN_THREADS = False
    client: DriverClient
    topic: str
    handle: str

    def _step(self, step: str, **args: Any) -> Any:
        return self.client._call("member", handle=self.handle, step=step, topic=self.topic, **args)

    def poll(self, timeout_ms: int = 100) -> list[Json]:
        return records_of(self._step("poll", timeout_ms=timeout_ms))

    def assignment(self) -> list[int]:
        return list(self._step("assignment"))

    def positions(self) -> dict[int, int]:
        return {int(p): o for p, o in self._step("positions").items()}

    def commit(self, offsets: dict[int, tuple[int, str]]) -> Json:
        return self._step("commit", offsets={str(p): [o, m] for p, (o, m) in offsets.items()})

    def committed(self, partitions: list[int]) -> Json:
        return self._step("committed", partitions=partitions)

    def close(self) -> None:
        self._step("close")
