"""The franz-go adapter: kgo (producer, direct consumer, group members) and kadm (admin).

Every operation is one request to the ``franz-driver`` process (``compat/franz``, built by
``compat.deps.franz_driver``), which speaks CompatDriver's JSON-lines protocol; bytes travel
base64-encoded and come back in the same record shape as the other clients. Producer and
consumer settings use Kafka's names where kgo has the same knob (the driver refuses others).

Beyond the base operations: ``version_guess`` (feature ``api_versions.guess``: the Kafka
release kversion infers from the broker's ApiVersions, as ``kcl misc probe-version`` prints
it), ``describe_acls`` and ``describe_client_quotas`` (feature ``admin.acls_quotas``: kadm's
DescribeACLs with an any-filter and DescribeClientQuotas with no filter).
Not expressed: positions after an offset reset without records (kgo has no position call),
legacy AlterConfigs, transactions (the transaction scenarios name their clients).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from compat.clients.base import (
    ADMIN_FEATURES,
    PRODUCE_FEATURES,
    FetchSettings,
    GroupMember,
    Json,
    Start,
    Unsupported,
    fetch_config,
)
from compat.clients.driver_client import HANDLES, DriverClient, DriverMember, records_of
from compat.clients.java import FETCH_NAMES
from compat.clients.java_driver import JavaDriver, JavaDriverError
from compat.deps import franz_driver


class FranzDriver(JavaDriver):
    """The franz-go driver process: CompatDriver's request/answer exchange (``JavaDriver``),
    started from the Go binary instead of a JVM."""

    def _start(self) -> subprocess.Popen[bytes]:
        with open(self.workdir / "driver-stderr.log", "ab") as stderr:
            self.proc = subprocess.Popen(
                [str(franz_driver())], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=self.workdir
            )  # fmt: skip
        ready = self._read_line(30.0)
        if '"ready":true' not in ready.replace(" ", ""):
            raise JavaDriverError(f"unexpected franz-go driver greeting {ready!r}")
        return self.proc


class FranzGoClient(DriverClient):
    name = "franz-go"
    FEATURES = frozenset(
        ADMIN_FEATURES | PRODUCE_FEATURES
        | {"consume", "consume.multi", "consume.timestamp", "consume.fetch", "consume.reset"}
        | {"list_offsets.max_timestamp", "list_offsets.isolation", "api_versions", "api_versions.guess",
           "admin.acls_quotas", "group", "group.consumer_protocol", "group.admin", "group.list_state",
           "group.delete_offsets", "group.raw"}
    )  # fmt: skip

    def make_driver(self, workdir: Path) -> FranzDriver:
        return FranzDriver(workdir)

    # --- admin (kadm) ------------------------------------------------------------------------
    def describe_cluster(self) -> Json:
        return self._call("describe_cluster")

    def api_versions(self) -> Json:
        return self._call("api_versions")

    def version_guess(self) -> Json:
        """kversion's guess of the Kafka release behind the broker's ApiVersions answer."""
        return self._call("version_guess")

    def describe_acls(self) -> Json:
        """Every ACL (kadm DescribeACLs, any resource/pattern/operation/principal), or an error."""
        return self._call("describe_acls")

    def describe_client_quotas(self) -> Json:
        """Every client quota (kadm DescribeClientQuotas, no filter), or an error."""
        return self._call("describe_client_quotas")

    # --- groups ------------------------------------------------------------------------------
    def group_member(self, topic: str, group: str, protocol: str = "classic") -> GroupMember:
        return FranzMember(self, topic, group, protocol)

    def list_groups(self, state: str | None = None) -> Json:
        return self._call("list_groups", states=[state] if state else [])

    def raw_offset_commit(self, group: str, generation: int, member: str, topic: str, offset: int) -> Json:
        return self._call("raw_offset_commit", group=group, generation=generation, member=member, topic=topic,
                          offset=offset)  # fmt: skip

    # --- data (kgo) --------------------------------------------------------------------------
    def consume(
        self, topic: str, partitions: list[int], start: Start, *,
        until: dict[int, int] | None = None, max_records: int | None = None,
        settings: FetchSettings | None = None, timeout_s: float = 15.0, until_moved: bool = False,
    ) -> Json:  # fmt: skip
        if until_moved:
            raise Unsupported("kgo reports no position moved by an offset reset without records")
        s = settings or FetchSettings()
        props: dict[str, Any] = {"auto.offset.reset": s.reset or "earliest"}
        props.update(fetch_config(s, FETCH_NAMES))
        raw = self._call(
            "consume", topic=topic, partitions=partitions, start=start, props=props,
            until={str(k): v for k, v in until.items()} if until is not None else None,
            max_records=max_records, timeout_ms=int(timeout_s * 1000), timeout=timeout_s + 30,
        )  # fmt: skip
        out: dict[str, Json] = {"records": records_of(raw["records"])}
        if "error" in raw:
            out["error"] = raw["error"]
        return out


class FranzMember(DriverMember):
    """A kgo client in a consumer group (classic, or KIP-848 through kgo.ServerSideBalancer),
    kept in the driver under a handle. One driver serves all members, so they poll in turn;
    each kgo client heartbeats on its own meanwhile."""

    def __init__(self, client: FranzGoClient, topic: str, group: str, protocol: str) -> None:
        self.client, self.topic = client, topic
        self.handle = f"{group}#{next(HANDLES)}"
        self._step("open", props={"group.id": group, "group.protocol": protocol})
