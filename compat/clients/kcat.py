"""The kcat adapter: the ``kcat`` command line (librdkafka 2.0.2 in Debian's build).

Producing pipes records to ``kcat -P`` (one run per group of records sharing a partition
and headers; ``-K`` splits key from value, ``-Z`` turns empty keys/values into nulls);
kcat prints nothing for a delivered record, so the outcome is the exit status and what kcat
printed. Consuming runs ``kcat -C -J -e`` and parses its JSON lines; ``-L -J`` answers
metadata and ``-Q`` offsets for timestamps. kcat has no admin operations.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compat.clients.base import Client, FetchSettings, Json, OffsetSpec, Rec, Start, Unsupported, fetch_config, record
from compat.clients.confluent import LIBRDKAFKA_SECURITY, librdkafka_security

if TYPE_CHECKING:
    from compat.security.client_security import ClientSecurity

MSG_DELIM = "\x1e"
KEY_DELIM = "\x1f"
TIMEOUT_S = 30.0
TS_TYPES = {"create": "CreateTime", "logappend": "LogAppendTime"}
CONNECT_TIMEOUT_S = 3  # kcat -m: how long -L waits for metadata before giving up


def _arg(data: bytes) -> str:
    text = data.decode("utf-8")  # kcat reads text lines; non-UTF-8 input is not expressible here
    if MSG_DELIM in text or KEY_DELIM in text:
        raise Unsupported("record contains kcat's delimiters")
    return text


FETCH_NAMES = {  # FetchSettings field -> this client's consumer config key
    "min_bytes": "fetch.min.bytes",
    "max_wait_ms": "fetch.wait.max.ms",
    "max_bytes": "fetch.max.bytes",
    "partition_max_bytes": "max.partition.fetch.bytes",
    "isolation": "isolation.level",
}


class KcatClient(Client):
    name = "kcat"
    FEATURES = frozenset({
        "admin.describe_topic", "admin.list_topics", "admin.describe_cluster", "admin.list_offsets",
        "produce", "produce.partition", "produce.headers", "produce.null", "produce.acks0",
        "consume", "consume.multi", "consume.timestamp", "consume.fetch", "consume.reset",
    })  # fmt: skip

    SECURITY = LIBRDKAFKA_SECURITY

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        super().__init__(bootstrap, workdir)
        self.kcat = shutil.which("kcat") or "kcat"

    def run(self, *args: str, stdin: str = "", timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.kcat, "-b", self.bootstrap, *args], input=stdin, capture_output=True, text=True,
            timeout=timeout, check=False,
        )  # fmt: skip

    # --- security ----------------------------------------------------------------------------
    def security_config(self, security: ClientSecurity) -> dict[str, Any]:
        return dict(librdkafka_security(security))

    def connect(self, extra: dict[str, Any]) -> Json:
        """``kcat -L`` with ``-X`` settings: None when it lists metadata, else its exit status,
        librdkafka's first connection failure (it logs one per retry, a count that varies
        with timing) and kcat's own error lines."""
        args = ["-L", "-J", "-m", str(CONNECT_TIMEOUT_S)]
        for key, value in extra.items():
            args += ["-X", f"{key}={value}"]
        out = self.run(*args)
        if out.returncode == 0:
            return None
        lines = out.stderr.splitlines()
        failures = [line.split("|", 2)[2] for line in lines if line.startswith("%") and "|FAIL|" in line]
        return {"exit": out.returncode, "first_failure": failures[0] if failures else None,
                "errors": [line for line in lines if line.startswith("% ERROR")]}  # fmt: skip

    # --- metadata ----------------------------------------------------------------------------
    def _metadata(self, *args: str) -> dict[str, Any]:
        out = self.run("-L", "-J", *args)
        if out.returncode != 0:
            raise RuntimeError(f"kcat -L failed: {out.stderr}")
        return json.loads(out.stdout)

    def describe_topic(self, name: str) -> Json:
        (topic,) = self._metadata("-t", name)["topics"]
        if "error" in topic:
            return {"error": topic["error"]}
        return {
            "partitions": [
                {"partition": p["partition"], "leader": p["leader"],
                 "replicas": [r["id"] for r in p["replicas"]], "isr": [r["id"] for r in p["isrs"]]}
                for p in sorted(topic["partitions"], key=lambda p: p["partition"])
            ]
        }  # fmt: skip

    def list_topics(self) -> Json:
        return sorted(t["topic"] for t in self._metadata()["topics"])

    def describe_cluster(self) -> Json:
        md = self._metadata()
        return {"controller": md["controllerid"], "nodes": sorted([b["id"], b["name"]] for b in md["brokers"])}

    def list_offsets(self, topic: str, partition: int, spec: OffsetSpec) -> Json:
        wire = {"earliest": -2, "latest": -1}.get(spec, spec) if isinstance(spec, str) else spec
        if isinstance(wire, str):
            raise Unsupported(f"kcat -Q cannot ask for {spec}")
        out = self.run("-Q", "-J", "-t", f"{topic}:{partition}:{wire}")
        if out.returncode != 0:
            return {"exit": out.returncode, "stderr": out.stderr.splitlines()}
        row = json.loads(out.stdout)[topic][str(partition)]
        if "error" in row:
            return {"error": row["error"]}
        return {"offset": row["offset"]}

    # --- data --------------------------------------------------------------------------------
    def produce(
        self, topic: str, records: list[Rec], *, acks: str = "all", codec: str = "none",
        sync: bool = False, extra: dict[str, str] | None = None,
    ) -> Json:  # fmt: skip
        if any(r.timestamp is not None for r in records):
            raise Unsupported("kcat cannot set record timestamps")
        groups: list[tuple[tuple[Any, ...], list[Rec]]] = []
        for r in records:
            if any(v is None for _, v in r.headers):
                raise Unsupported("kcat cannot send null header values")
            nulls = r.key is None or r.value is None
            if nulls and (r.key == b"" or r.value == b""):
                raise Unsupported("kcat -Z cannot mix empty and null")
            key = (r.partition, r.headers, nulls)
            if sync or not groups or groups[-1][0] != key:
                groups.append((key, []))
            groups[-1][1].append(r)
        config = {"acks": acks, "compression.codec": codec, "linger.ms": "5", "message.timeout.ms": "15000",
                  **(extra or {})}  # fmt: skip
        results: list[Json] = []
        for (partition, headers, nulls), group in groups:
            args = ["-P", "-t", topic, "-D", MSG_DELIM, "-K", KEY_DELIM]
            if partition is not None:
                args += ["-p", str(partition)]
            if nulls:
                args.append("-Z")
            for k, v in headers:
                args += ["-H", f"{_arg(k.encode())}={_arg(v)}"]
            for k, v in config.items():
                args += ["-X", f"{k}={v}"]
            stdin = "".join(f"{_arg(r.key or b'')}{KEY_DELIM}{_arg(r.value or b'')}{MSG_DELIM}" for r in group)
            out = self.run(*args, stdin=stdin)
            results.append({"exit": out.returncode, "stderr": out.stderr.splitlines()})
        return results

    def consume(
        self, topic: str, partitions: list[int], start: Start, *,
        until: dict[int, int] | None = None, max_records: int | None = None,
        settings: FetchSettings | None = None, timeout_s: float = 15.0, until_moved: bool = False,
    ) -> Json:  # fmt: skip
        if until_moved:
            raise Unsupported("positions are not visible")
        s = settings or FetchSettings()
        if isinstance(start, dict):
            offset = f"s@{start['timestamp']}"
        else:
            offset = {"earliest": "beginning", "latest": "end"}.get(str(start), str(start))
        args = ["-C", "-J", "-e", "-t", topic, "-o", offset]
        if len(partitions) == 1:
            args += ["-p", str(partitions[0])]
        if max_records is not None:
            args += ["-c", str(max_records)]
        config: dict[str, Any] = {"auto.offset.reset": {"none": "error"}.get(s.reset, s.reset or "earliest")}
        config.update(fetch_config(s, FETCH_NAMES))
        for k, v in config.items():
            args += ["-X", f"{k}={v}"]
        out = self.run(*args, timeout=timeout_s + 15)
        got = []
        for line in out.stdout.splitlines():
            m = json.loads(line)
            flat = m.get("headers") or []
            headers = [(flat[i], None if flat[i + 1] is None else flat[i + 1].encode()) for i in range(0, len(flat), 2)]
            key = None if m["key"] is None else m["key"].encode()
            value = None if m["payload"] is None else m["payload"].encode()
            got.append(record(m["partition"], m["offset"], key, value, headers, m["ts"],
                              TS_TYPES.get(m["tstype"], m["tstype"])))  # fmt: skip
        if len(partitions) > 1:
            got = [r for r in got if r["partition"] in partitions]
        result: dict[str, Json] = {"records": got, "exit": out.returncode}
        errors = [line for line in out.stderr.splitlines() if "ERROR" in line]
        if errors:
            result["stderr"] = errors
        return result

