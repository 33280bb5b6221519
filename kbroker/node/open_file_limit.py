"""The process's descriptor budget: RLIMIT_NOFILE raised at start, and its share for segments.

Kafka's start scripts leave the limit to the operator, and a node that runs out of descriptors
stops accepting clients. kbroker raises the soft limit to the hard one at start (logging both),
and keeps at most half of it for open segment files (``SegmentFileCache``: least recently used
closed first), so the other half stays free for connections and the number of partitions a
node holds is not bounded by the limit.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)

_NR_OPEN = "/proc/sys/fs/nr_open"
_MIN_SEGMENT_FILES = 64
_MAX_SEGMENT_FILES = 1 << 20


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open(_NR_OPEN, encoding="ascii") as fh:
                target = int(fh.read())
        except (OSError, ValueError):
            target = soft
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as exc:
            log.warning("open file limit: soft %d, hard %d; raising the soft limit failed: %s", soft, hard, exc)
            return soft
        log.info("open file limit: soft %d raised to the hard limit %d", soft, target)
        return target
    log.info("open file limit: soft %d, hard %d", soft, hard)
    return soft


def segment_file_budget() -> int:
    """How many segment files may be open at once: half the soft limit now in force."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return _MAX_SEGMENT_FILES
    return max(_MIN_SEGMENT_FILES, min(soft // 2, _MAX_SEGMENT_FILES))
