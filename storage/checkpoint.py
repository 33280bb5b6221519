"""Kafka's text checkpoint files: ``version\\ncount\\nentry...``, replaced atomically.

Used for ``leader-epoch-checkpoint`` (entries ``epoch start_offset``) and the per-log-dir
``recovery-point-offset-checkpoint`` / ``log-start-offset-checkpoint`` (entries
``topic partition offset``), in the same format Kafka writes so operators can read them.
"""

from __future__ import annotations

import logging
import os

from .file_io import replace_atomically

log = logging.getLogger(__name__)

CHECKPOINT_VERSION = 0


def write_checkpoint(path: str, entries: list[tuple[str, ...]], *, durable: bool = True) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [" ".join(entry) for entry in entries]
    replace_atomically(path, ("\n".join(lines) + "\n").encode(), durable=durable)


def read_checkpoint(path: str, fields: int) -> list[list[str]]:
    """Entries of a checkpoint file; a missing or malformed file reads as empty (and says so)."""
    if not os.path.exists(path):
        return []
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        version, count = int(lines[0]), int(lines[1])
        if version != CHECKPOINT_VERSION:
            raise ValueError(f"unknown checkpoint version {version}")
        entries = [line.split() for line in lines[2 : 2 + count]]
        if len(entries) != count or any(len(e) != fields for e in entries):
            raise ValueError("entry count or shape disagrees with header")
        return entries
    except (ValueError, IndexError) as exc:
        log.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return []
