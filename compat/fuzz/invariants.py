"""What must hold after every batch besides liveness: the broker's log and its data directory.

``LogWatch`` reads what a broker appended to its log since the last look and sorts the records
at ERROR and above: kbroker's "unexpected error handling <API> v<N> (correlation id ...)" names
the request it came from (the dispatcher logs it and closes that connection) and is counted per
API; any other ERROR record or bare traceback is unexplained. Kafka logs at ERROR much of what a
bad request causes ("Closing socket for <connection> because of error", "Error processing append
operation on partition ..."), so its records are all counted, per form, and none is a finding.

``DiskWatch`` compares the data directory with the state after the previous batch. Each
partition directory is known by name and (from ``partition.metadata``) topic id; each ``.log``
file by size and BLAKE2 digest. A new directory must belong to a topic whose CreateTopics or
CreatePartitions was answered with error 0; a vanished one to a topic whose DeleteTopics was;
a changed ``.log`` to a partition written by an accepted request in this batch (an append is
in the file before the broker answers, and an acks=0 Produce is done when the probe after it is
answered), or to a topic an accepted request opened (``responses.Effects``; a compacted topic
is opened by its first accepted write, the cleaner rewriting it later), or to one the corpus
may change by design (``world.TopicSpec.mutable``), or to a topic the fuzz run itself created.
Internal topics (``__consumer_offsets``, ``__transaction_state``, ``__cluster_metadata``) change
with every accepted group or transaction request and are left out.
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from compat.fuzz import world
from compat.fuzz.responses import Effects

PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
KBROKER_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?P<level>[A-Z]+) \S+: (?P<message>.*)$")
KAFKA_RECORD = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] (?P<level>[A-Z]+) (?P<message>.*)$")
KBROKER_EXPLAINED = re.compile(r"^unexpected error handling (?P<api>\w+) v\d+ \(correlation id -?\d+\)")
LOGGER_SUFFIX = re.compile(r"\s*\([\w.$]+\)$")
FORM_WORDS = 8
PEER = re.compile(r"127\.0\.0\.1:(?P<port>\d+)")  # the fuzzer's end of a connection, as brokers log it
SEVERE = ("ERROR", "CRITICAL", "FATAL")
SAMPLES = 5


@dataclass
class LogFindings:
    explained: Counter[str] = field(default_factory=Counter)  # per API name
    explained_samples: dict[str, list[str]] = field(default_factory=dict)
    unexplained: list[str] = field(default_factory=list)


class LogWatch:
    """Incremental reader of one broker log file; ``flavour`` is "kbroker" or "kafka"."""

    def __init__(self, path: Path, flavour: str) -> None:
        self.path = path
        self.flavour = flavour
        self.record = KBROKER_RECORD if flavour == "kbroker" else KAFKA_RECORD
        self.offset = 0
        self.partial = ""

    def skip_to_end(self) -> None:
        self.offset = self.path.stat().st_size if self.path.exists() else 0
        self.partial = ""

    def scan(self, case_by_port: dict[int, int]) -> LogFindings:
        """The severe records appended since the last scan, each prefixed with the case whose
        connection it names (``case_by_port``: client port -> case index) when it names one."""
        findings = LogFindings()
        if not self.path.exists():
            return findings
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        text = self.partial + data.decode("utf-8", "replace")
        lines = text.split("\n")
        self.partial = lines.pop()  # an unfinished last line is read again next time
        current: list[str] | None = None  # the severe record being collected (with its traceback)
        for line in [*lines, ""]:  # the empty sentinel closes the last record
            match = self.record.match(line)
            if match is None and current is not None and line:
                current.append(line)
                continue
            if current is not None:
                self._classify(current, findings, case_by_port)
                current = None
            if match is not None and match.group("level") in SEVERE:
                current = [line]
            elif match is None and line.startswith("Traceback"):
                current = [line]  # printed by the interpreter, not through logging
        return findings

    def _classify(self, record: list[str], findings: LogFindings, case_by_port: dict[int, int]) -> None:
        head = self.record.match(record[0])
        message = head.group("message") if head else record[0]
        summary = "\n".join([record[0], *record[-2:]] if len(record) > 3 else record)
        cases = [case_by_port[p] for p in (int(m.group("port")) for m in PEER.finditer(record[0])) if p in case_by_port]
        if cases:
            summary = f"case {cases[0]}: {summary}"
        if self.flavour == "kafka":
            api = kafka_form(message)
        else:
            explained = KBROKER_EXPLAINED.search(message) if head else None
            if explained is None:
                findings.unexplained.append(summary)
                return
            api = explained.group("api")
        findings.explained[api] += 1
        samples = findings.explained_samples.setdefault(api, [])
        if len(samples) < SAMPLES:
            samples.append(summary)


def kafka_form(message: str) -> str:
    """A Kafka log message without its logger and without the words that carry names, numbers
    or addresses: what records of one kind have in common."""
    words = [w for w in LOGGER_SUFFIX.sub("", message).split() if not any(c.isdigit() or c in ":=/-_" for c in w)]
    return " ".join(words[:FORM_WORDS])


@dataclass(frozen=True)
class PartitionDir:
    topic: str
    partition: int
    topic_id: uuid.UUID | None
    logs: dict[str, tuple[int, bytes]]  # .log file name -> (size, digest)


def _topic_id(directory: Path) -> uuid.UUID | None:
    """The topic id in a partition's ``partition.metadata`` (Kafka's base64 form)."""
    try:
        text = (directory / "partition.metadata").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("topic_id:"):
            encoded = line.split(":", 1)[1].strip()
            try:
                return uuid.UUID(bytes=base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
            except ValueError:
                return None
    return None


def _digest(path: Path) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.digest()


def snapshot(data_dir: Path) -> dict[str, PartitionDir]:
    """Every live partition directory under ``data_dir`` (internal topics left out)."""
    out = {}
    for entry in data_dir.iterdir() if data_dir.exists() else ():
        match = PARTITION_DIR.match(entry.name)
        if match is None or not entry.is_dir() or entry.name.startswith("__"):
            continue  # checkpoints, meta.properties, "-delete"/"-stray" directories, internal topics
        logs = {}
        try:
            for f in entry.iterdir():
                if f.suffix == ".log":
                    logs[f.name] = (f.stat().st_size, _digest(f))
        except FileNotFoundError:  # deleted while we looked: counts as gone
            continue
        out[entry.name] = PartitionDir(match.group("topic"), int(match.group("partition")), _topic_id(entry), logs)
    return out


@dataclass
class DiskWatch:
    """The disk invariant over one target's data directory."""

    data_dir: Path
    checked: set[str] = field(default_factory=lambda: {t.name for t in world.TOPICS if not t.mutable})
    # Once written, a compacted topic's rolled segments are rewritten by the log cleaner when it
    # gets to them (Kafka rolls a segment whose first record is older than segment.ms, and the
    # generated records carry 2023 timestamps).
    compacted: set[str] = field(default_factory=lambda: {
        t.name for t in world.TOPICS if "compact" in t.configs.get("cleanup.policy", "")})
    baseline: dict[str, PartitionDir] = field(default_factory=dict)

    def rebase(self) -> None:
        """Take the current state as the one to compare with (start, after a restart)."""
        self.baseline = snapshot(self.data_dir)

    def check(self, effects: Effects) -> list[str]:
        """Violations since the last check; the current state becomes the baseline."""
        now = snapshot(self.data_dir)
        violations = []
        effects.opened.update(topic for topic, _partition in effects.written if topic in self.compacted)
        for name, state in now.items():
            before = self.baseline.get(name)
            topic = state.topic
            if before is None:
                if topic not in effects.created_topics and topic not in effects.grown_topics:
                    violations.append(f"{name}: new directory without an accepted CreateTopics/CreatePartitions")
                continue
            if before.logs == state.logs or topic not in self.checked or topic in effects.opened:
                continue
            if (topic, state.partition) in effects.written:
                continue
            changed = sorted(set(before.logs.items()) ^ set(state.logs.items()))
            violations.append(f"{name}: log changed without an accepted write: {[c[0] for c in changed]}")
        for name, before in self.baseline.items():
            if name in now:
                continue
            if before.topic in effects.deleted_topics or before.topic_id in effects.deleted_ids:
                continue
            violations.append(f"{name}: partition directory gone without an accepted DeleteTopics")
        self.baseline = now
        effects.written.clear()
        return violations
