"""Which old segments time and size retention let go (Kafka's retention-breached checks).

Only whole segments go, oldest first, and only those entirely below the high watermark. By
retention.ms, a segment goes when its largest timestamp is older than the limit, stopping at the
first one that is not; by retention.bytes, while the log without it is still over the limit.
A segment ends where the next begins (after compaction its own next offset may be lower). The
log applies the answer (``PartitionLog.enforce_retention``): segments deleted, log start moved.
"""

from __future__ import annotations

from .log_config import LogConfig
from .segment import LogSegment


def retention_cutoff(segments: list[LogSegment], log_end_offset: int, high_watermark: int, config: LogConfig,
                     now_ms: int) -> int:
    """The offset below which every segment may be deleted (0 if none may)."""
    cutoff = 0
    ends = [segments[i + 1].base_offset for i in range(len(segments) - 1)]
    ends.append(log_end_offset)
    candidates = [
        (segment, end) for segment, end in zip(segments, ends, strict=True)
        if segment.next_offset <= high_watermark and not segment.is_empty
    ]
    if config.retention_ms >= 0:
        for segment, end in candidates:
            if now_ms - segment.largest_timestamp() <= config.retention_ms:
                break
            cutoff = end
    if config.retention_bytes >= 0:
        excess = sum(segment.size for segment in segments) - config.retention_bytes
        for segment, end in candidates:
            if excess < segment.size:
                break
            excess -= segment.size
            cutoff = max(cutoff, end)
    return cutoff
