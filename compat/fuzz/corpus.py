"""The corpus: well-formed frames for every API key and version kbroker serves, and the cases made from them.

Two sources. **Recorded** frames are requests real clients sent (kafka-python, aiokafka,
confluent-kafka, kcat, the Java client and Kafka's CLI tools, through ``record.py``'s proxy);
they live in ``recorded.jsonl`` next to this module, committed. Committed rather than recorded
at the start of every run because recording needs two JVMs and five client stacks (half a
minute on an idle machine, much more on a busy one), which the two-minute CI slice cannot
spare, and because a committed file makes a seed mean the same frames on every machine and
every day (clients pick versions and fields by their own releases). The file is our own
traffic, under 100 KB; ``python -m compat.fuzz record`` rewrites it. **Generated** frames come
from ``generate.py`` for every (key, version) in ``kbroker.handlers.HANDLERS``: clients send
only the newest versions they know, so the older ones exist only as generated frames.

``Corpus.case(i)`` is a pure function of (seed, i): it picks an API key (uniformly, so every
API gets its share of a run, except Produce: ``API_WEIGHTS``), a served version, a recorded
frame of that version when there is one (half of the time) or a generated one, mutates it
(``mutators.py``), and says whether the case opens a fresh connection. Topic ids in frames are
the ids the recording broker gave the world's topics; the runner swaps in the target's own.
"""

from __future__ import annotations

import base64
import json
import random
import struct
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from compat.fuzz.generate import RequestGenerator
from compat.fuzz.layout import Layout, LayoutError, walk
from compat.fuzz.mutators import Limits, Mutated, mutate
from kbroker.handlers import HANDLERS

RECORDED = Path(__file__).with_name("recorded.jsonl")
GENERATED_PER_VERSION = 8  # pooled at start; a quarter of the generated cases draw a fresh one
FRESH_GENERATION_SHARE = 0.25
RECORDED_SHARE = 0.5
FRESH_CONNECTION_SHARE = 0.1
# Produce is drawn three times as often as other APIs: its record batches (headers, CRCs,
# compressed payloads) are where most of the mutation operators aim.
API_WEIGHTS = {0: 3}
GENERATED = "generated"


@dataclass(frozen=True)
class BaseFrame:
    """A well-formed request frame (header and body, no size prefix) and where it came from."""

    api_key: int
    api_version: int
    source: str  # the client that sent it, or "generated"
    frame: bytes
    layout: Layout | None
    # A recorded-corpus frame no client sent: made by the recorder (or built by hand) for an
    # API no client here sends, so that every API has a recorded frame (record.py says which).
    generated: bool = False


@dataclass(frozen=True)
class Case:
    """One fuzz case: counted under its base frame's API, sent as ``mutated.wire``."""

    index: int
    api_key: int
    api_version: int
    source: str
    mutated: Mutated
    fresh_connection: bool


@dataclass
class Recorded:
    """The recorded corpus: frames and the topic ids the recording broker assigned."""

    topic_ids: dict[str, uuid.UUID]
    frames: list[BaseFrame]
    note: str = ""  # how it was made (the file's header line)


def served_versions() -> dict[int, list[int]]:
    """{API key: versions} kbroker serves (the table ApiVersions answers from)."""
    return {key: list(range(m.MIN_VERSION, m.MAX_VERSION + 1)) for key, m in sorted(HANDLERS.items())}


def base_frame(frame: bytes, source: str, generated: bool = False) -> BaseFrame:
    try:
        layout: Layout | None = walk(frame, trailing_ok=True)  # librdkafka's Metadata v13 has 3 extra bytes
    except LayoutError:
        layout = None  # still a seed for the byte-level operators
    api_key, api_version = struct.unpack_from(">hh", frame, 0)
    return BaseFrame(api_key, api_version, source, frame, layout, generated)


def load_recorded(path: Path = RECORDED) -> Recorded:
    """The committed recording (an empty one if the file is missing)."""
    if not path.exists():
        return Recorded({}, [])
    lines = path.read_text().splitlines()
    head = json.loads(lines[0])
    topic_ids = {name: uuid.UUID(text) for name, text in head["topic_ids"].items()}
    frames = []
    for line in lines[1:]:
        entry = json.loads(line)
        frames.append(base_frame(base64.b64decode(entry["frame"]), entry["client"], entry.get("generated", False)))
    return Recorded(topic_ids, frames, head.get("note", ""))


def save_recorded(recorded: Recorded, note: str, path: Path = RECORDED) -> None:
    """Write the recording: a header line (topic ids, how it was made), then one frame per line."""
    head = {"note": note, "topic_ids": {name: str(tid) for name, tid in sorted(recorded.topic_ids.items())}}
    lines = [json.dumps(head, sort_keys=True)]
    for f in recorded.frames:
        entry = {"client": f.source, "key": f.api_key, "version": f.api_version,
                 "frame": base64.b64encode(f.frame).decode()}  # fmt: skip
        if f.generated:
            entry["generated"] = True
        lines.append(json.dumps(entry, sort_keys=True))
    path.write_text("\n".join(lines) + "\n")


class Corpus:
    """Base frames for every served (key, version) and the deterministic cases made from them."""

    def __init__(self, seed: int, recorded: Recorded, limits: Limits) -> None:
        self.seed = seed
        self.limits = limits
        self.topic_ids = recorded.topic_ids
        self.versions = served_versions()
        self.keys = sorted(self.versions)
        self.weights = [API_WEIGHTS.get(key, 1) for key in self.keys]
        self.recorded: dict[tuple[int, int], list[BaseFrame]] = defaultdict(list)
        for f in recorded.frames:
            if f.api_version in self.versions.get(f.api_key, ()):
                self.recorded[(f.api_key, f.api_version)].append(f)
        generator = RequestGenerator(random.Random(f"{seed}/pool"), self.topic_ids)
        self.generated: dict[tuple[int, int], list[BaseFrame]] = {
            (key, version): [base_frame(generator.frame(key, version), GENERATED) for _ in range(GENERATED_PER_VERSION)]
            for key, versions in self.versions.items()
            for version in versions
        }

    def recorded_versions(self) -> dict[int, list[int]]:
        """{API key: the served versions that have recorded frames}, for the report."""
        return {key: [v for v in versions if self.recorded.get((key, v))] for key, versions in self.versions.items()}

    def case(self, index: int) -> Case:
        rng = random.Random(f"{self.seed}/{index}")
        key = rng.choices(self.keys, weights=self.weights)[0]
        version = rng.choice(self.versions[key])
        recorded = self.recorded.get((key, version))
        if recorded and rng.random() < RECORDED_SHARE:
            base = rng.choice(recorded)
        elif rng.random() < FRESH_GENERATION_SHARE:
            base = base_frame(RequestGenerator(rng, self.topic_ids).frame(key, version), GENERATED)
        else:
            base = rng.choice(self.generated[(key, version)])
        mutated = mutate(base.frame, base.layout, rng, self.limits)
        return Case(index, key, version, base.source, mutated, rng.random() < FRESH_CONNECTION_SHARE)
