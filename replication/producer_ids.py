"""ProducerIdManager: hands out producer ids that are never reused, across restarts and crashes.

Ids come in blocks of ``BLOCK_SIZE``; the end of the current block is written to
``kbroker-producer-ids`` in the first log dir (atomically, fsynced) before any id from it is
used — as Kafka's controller hands out producer-id blocks. A crash skips at most the unused
rest of one block.
"""

from __future__ import annotations

from kbroker.storage.file_io import replace_atomically

PRODUCER_ID_FILE = "kbroker-producer-ids"
BLOCK_SIZE = 1000


class ProducerIdManager:
    """Unique producer ids: the file holds the first id of no block handed out yet."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.next_id = 0
        self.block_end = 0  # exclusive; nothing reserved yet in this process

    def allocate(self) -> int:
        if self.next_id >= self.block_end:
            start = max(self.next_id, self._reserved_until())
            # Reserve before handing out: after a crash the next process starts past it.
            replace_atomically(self.path, f"{start + BLOCK_SIZE}\n".encode())
            self.next_id, self.block_end = start, start + BLOCK_SIZE
        producer_id = self.next_id
        self.next_id += 1
        return producer_id

    def _reserved_until(self) -> int:
        try:
            with open(self.path, encoding="ascii") as fh:
                return int(fh.read().strip() or 0)
        except FileNotFoundError:
            return 0
