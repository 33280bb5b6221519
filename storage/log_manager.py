"""LogManager: every PartitionLog in every ``log.dirs`` directory, their checkpoints and startup.

Per log directory (Kafka's layout): ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint`` and ``replication-offset-checkpoint`` (the high watermarks the
replica manager hands in; ``topic partition offset`` entries) and the ``.kafka_cleanshutdown``
marker, written last by a clean shutdown and removed at start-up.
Without the marker, segments past each partition's recovery point are CRC-scanned and a torn
tail is cut (``PartitionLog.load``). A shutdown writes no marker in a dir where a log is
offline or a checkpoint could not be written, so the next start recovers it.

The manager owns what its logs share: the ``SegmentFileCache`` bounding open segment
descriptors (so the number of partitions is not bounded by the descriptor limit) and the
``LogDirHealth`` that hears of write failures.

A shutdown closes the logs on ``num.recovery.threads.per.data.dir`` threads per directory, as
Kafka does: closing is mostly fsync (the active segment, the producer state snapshot and its
directory), which waits on the disk without the GIL, and the filesystem's journal commits
concurrent fsyncs together (5,000 partitions with data: 14.7 s on one thread here).

A replica moves to another log dir (AlterReplicaLogDirs, JBOD) through a *future* log in
``<dest dir>/<topic>-<partition>.<id>-future`` that copies the current one
(``storage/log_dir_move.py``); ``replace_current_with_future`` then renames the current
directory to ``<topic>-<partition>.<id>-delete`` and the future one to ``<topic>-<partition>``
(each rename fsynced in its parent) and reopens it. A crash between the two renames leaves a
future directory and no current one: the start-up completes the swap (the future log held
everything when the swap began). A future directory beside a current one is an unfinished
move: it is removed (nothing acknowledged lives only there) and the move must be asked again.
``-delete`` directories are removed at start-up.

Many new logs at once (a topic of a thousand partitions, or a broker given its replicas) are
planned by ``plan_new_logs``, written by ``write_new_logs`` on a few threads (each is a
directory and two new files: kernel work that runs without the GIL) and taken in by
``adopt_new_logs`` on the caller's thread, so the event loop need not wait for the writing and
shares none of the manager's state with a thread.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .checkpoint import read_checkpoint, write_checkpoint
from .clock import SYSTEM_CLOCK, Clock
from .file_io import fsync_dir, rename, replace_atomically
from .log import PartitionLog
from .log_config import LogConfig
from .log_dir_health import LogDirHealth
from .segment import SegmentFileCache

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
# The controller quorum's log (Raft's, kept by the controller node, not by this manager) may sit
# in a log dir of a combined node: it is never loaded as a partition here.
METADATA_LOG_TOPIC = "__cluster_metadata"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"


@dataclass(frozen=True, slots=True)
class NewLog:
    """A new empty log to write: its directory, partition, topic id and config."""

    path: str
    topic: str
    partition: int
    topic_id: str
    config: LogConfig
    # The leader epoch this broker begins the log with when it is to lead the partition: its
    # ``leader-epoch-checkpoint`` is written with the other files instead of on the loop.
    leader_epoch: int | None = None

TopicPartition = tuple[str, int]


def parse_moving_dir(name: str, suffix: str) -> TopicPartition | None:
    """The partition of a ``<topic>-<partition>.<id><suffix>`` directory (a move's future or
    retired copy), else None."""
    if not name.endswith(suffix):
        return None
    base, dot, _id = name[: -len(suffix)].rpartition(".")
    return parse_partition_dir(base) if dot else None


def parse_partition_dir(name: str) -> TopicPartition | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or topic == METADATA_LOG_TOPIC:
        return None
    return topic, int(partition)


class LogManager:
    def __init__(self, log_dirs: list[str], config_for: Callable[[str], LogConfig],
                 max_open_segment_files: int | None = None, recovery_threads_per_data_dir: int = 2,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.clock = clock
        self.config_for = config_for
        self.recovery_threads_per_data_dir = max(1, recovery_threads_per_data_dir)
        self.files = SegmentFileCache(max_open_segment_files)
        self.health = LogDirHealth()
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.future_logs: dict[TopicPartition, PartitionLog] = {}  # replicas moving to another dir
        self._dir_of: dict[TopicPartition, str] = {}
        self._logs_in = dict.fromkeys(self.log_dirs, 0)  # a new log goes to the dir with fewest
        # The last high watermark handed in (or read at start-up) per log: a restarted replica
        # resumes from it instead of its log start, and a partition the replica manager has not
        # taken up yet keeps its entry when the file is written again.
        self._high_watermarks: dict[TopicPartition, int] = {}
        # The broker epoch a clean shutdown recorded in every dir's marker, else -1 (KIP-966:
        # the controller trusts a replica's ELR claim only after a clean shutdown).
        self.clean_shutdown_broker_epoch = -1

    def startup(self) -> None:
        """Load every partition log found on disk, recovering after an unclean shutdown."""
        started = time.monotonic()
        epochs: list[int] = []
        for log_dir in self.log_dirs:
            os.makedirs(log_dir, exist_ok=True)
        self._finish_interrupted_moves()
        for log_dir in self.log_dirs:
            marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
            clean = os.path.exists(marker)
            epochs.append(_marker_broker_epoch(marker) if clean else -1)
            has_logs = any(parse_partition_dir(n) for n in os.listdir(log_dir))
            if not clean and has_logs:
                log.warning("log dir %s was not shut down cleanly: recovering unflushed segments", log_dir)
            recovery_points = _offsets(os.path.join(log_dir, RECOVERY_POINT_FILE))
            start_offsets = _offsets(os.path.join(log_dir, LOG_START_OFFSET_FILE))
            high_watermarks = _offsets(os.path.join(log_dir, HIGH_WATERMARK_FILE))
            names = [n for n in sorted(os.listdir(log_dir)) if parse_partition_dir(n)]
            last_report = time.monotonic()
            for done, name in enumerate(names):
                path = os.path.join(log_dir, name)
                tp = parse_partition_dir(name)
                if tp is None or not os.path.isdir(path):
                    continue
                if time.monotonic() - last_report > 1.0:  # say so when loading takes a while
                    log.info("loading logs in %s: %d/%d partitions", log_dir, done, len(names))
                    last_report = time.monotonic()
                plog = PartitionLog(
                    path, tp[0], tp[1], self.config_for(tp[0]),
                    log_start_offset=start_offsets.get(tp, 0),
                    recovery_point=recovery_points.get(tp, 0),
                    files=self.files, health=self.health, clock=self.clock,
                )
                plog.load(clean_shutdown=clean)
                self.logs[tp] = plog
                if tp in high_watermarks:
                    self._high_watermarks[tp] = high_watermarks[tp]
                self._dir_of[tp] = log_dir
                self._logs_in[log_dir] += 1
            if clean:
                os.unlink(marker)
                fsync_dir(log_dir)
        self.clean_shutdown_broker_epoch = min(epochs) if epochs and len(set(epochs)) == 1 else -1
        log.info("loaded %d partition logs in %.2fs", len(self.logs), time.monotonic() - started)

    def _finish_interrupted_moves(self) -> None:
        """Before loading: complete a swap a crash cut between its renames, remove unfinished
        future logs and retired ones (see the module docstring)."""
        current = {tp for d in self.log_dirs for n in os.listdir(d)
                   if (tp := parse_partition_dir(n)) and os.path.isdir(os.path.join(d, n))}  # fmt: skip
        for log_dir in self.log_dirs:
            for name in sorted(os.listdir(log_dir)):
                path = os.path.join(log_dir, name)
                future = parse_moving_dir(name, FUTURE_SUFFIX)
                if future is not None and future not in current:
                    rename(path, os.path.join(log_dir, f"{future[0]}-{future[1]}"))
                    fsync_dir(log_dir)
                    current.add(future)
                    log.warning("start-up: %s-%d: the move to %s was cut between its renames; completed",
                                future[0], future[1], log_dir)
                elif future is not None or parse_moving_dir(name, DELETE_SUFFIX) is not None:
                    if future is not None:
                        log.warning("start-up: %s-%d: unfinished move to %s dropped (ask it again)",
                                    future[0], future[1], log_dir)
                    shutil.rmtree(path, ignore_errors=True)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def create(self, topic: str, partition: int, topic_id: str) -> PartitionLog:
        existing = self.logs.get((topic, partition))
        if existing is not None:
            return existing
        log_dir = min(self.log_dirs, key=lambda d: self._logs_in[d])
        path = os.path.join(log_dir, f"{topic}-{partition}")
        try:
            plog = PartitionLog.create(path, topic, partition, topic_id, self.config_for(topic),
                                       files=self.files, health=self.health, clock=self.clock)
        except OSError as exc:
            self.health.write_failed(log_dir, f"creating {topic}-{partition}", exc)
            raise
        self.logs[(topic, partition)] = plog
        self._dir_of[(topic, partition)] = log_dir
        self._logs_in[log_dir] += 1
        return plog

    def plan_new_logs(self, wanted: list[tuple[str, int, str]],
                      leader_epochs: Mapping[TopicPartition, int] | None = None) -> list[NewLog]:
        """Where each (topic, partition, topic id) not here yet gets its new log, and its config:
        made on the thread that owns the manager, for ``write_new_logs``. ``leader_epochs``: the
        epoch of each partition this broker is to lead, recorded at offset 0 in the new log."""
        epochs = leader_epochs or {}
        counts = dict(self._logs_in)
        configs: dict[str, LogConfig] = {}
        planned = []
        for topic, partition, topic_id in wanted:
            if (topic, partition) in self.logs:
                continue
            log_dir = min(self.log_dirs, key=lambda d: counts[d])
            counts[log_dir] += 1
            path = os.path.join(log_dir, f"{topic}-{partition}")
            if not os.path.exists(path):  # never over a directory made some other way
                if topic not in configs:
                    configs[topic] = self.config_for(topic)
                planned.append(NewLog(path, topic, partition, topic_id, configs[topic],
                                      epochs.get((topic, partition))))
        return planned

    def write_new_logs(self, planned: list[NewLog]) -> list[PartitionLog]:
        """Write the directory and files of each planned empty log, one after another. It changes
        nothing the manager shares, so the caller runs it on a thread of its own, off its event
        loop (``adopt_new_logs`` registers what it returns). One thread, not several: each log is
        Python work too, and four threads holding the GIL in turn starved the event loop (a
        5,000-partition topic: other clients' produce p99 88 ms and stalls to 0.26 s with four
        writers, 8 ms and 0.13 s with one, for the same total time). A log that cannot be
        written is left out (its directory removed): ``create`` meets the same error and
        reports it to LogDirHealth as for any one log."""

        def write(new: NewLog) -> PartitionLog | None:
            try:
                # A descriptor cache of its own: the shared one is the loop thread's (adopt_new_logs).
                plog = PartitionLog.create(new.path, new.topic, new.partition, new.topic_id, new.config,
                                           files=SegmentFileCache(), health=self.health, clock=self.clock)
            except OSError:
                return None
            if new.leader_epoch is not None:
                try:
                    # What becoming leader would write first (the epoch starts at the empty
                    # log's end): written here, it is one file less for the loop per partition.
                    plog.leader_epoch_cache.assign(new.leader_epoch, 0)
                except OSError:
                    plog.delete()  # its files closed, its directory removed
                    return None
            return plog

        return [plog for plog in map(write, planned) if plog is not None]

    def adopt_new_logs(self, made: list[PartitionLog]) -> None:
        """Register logs ``write_new_logs`` made (on the thread that owns the manager)."""
        for plog in made:
            key = (plog.topic, plog.partition)
            if key in self.logs:
                continue
            plog.files = self.files  # its segment's descriptor is closed: nothing to move over
            for segment in plog.segments:
                segment.files = self.files
            self.logs[key] = plog
            self._dir_of[key] = plog.log_dir
            self._logs_in[plog.log_dir] += 1

    def delete(self, topic: str, partition: int) -> None:
        self.abandon_future(topic, partition)
        plog = self.logs.pop((topic, partition), None)
        self._high_watermarks.pop((topic, partition), None)
        log_dir = self._dir_of.pop((topic, partition), None)
        if log_dir is not None:
            self._logs_in[log_dir] -= 1
        if plog is not None:
            plog.delete()

    def dir_of(self, topic: str, partition: int) -> str:
        return self._dir_of[(topic, partition)]

    # --- moving a replica between log dirs ---------------------------------------------------

    def future_dir_of(self, topic: str, partition: int) -> str | None:
        future = self.future_logs.get((topic, partition))
        return None if future is None else future.log_dir

    def create_future(self, topic: str, partition: int, log_dir: str, topic_id: str) -> PartitionLog:
        """An empty future log for the partition in ``log_dir`` (one of ``log_dirs``)."""
        path = os.path.join(log_dir, f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_SUFFIX}")
        try:
            future = PartitionLog.create(path, topic, partition, topic_id, self.config_for(topic),
                                         files=self.files, health=self.health, clock=self.clock)
        except OSError as exc:
            self.health.write_failed(log_dir, f"creating the future log of {topic}-{partition}", exc)
            raise
        self.future_logs[(topic, partition)] = future
        return future

    def abandon_future(self, topic: str, partition: int) -> None:
        """Stop a move: the future log and its directory go (the current log is untouched)."""
        future = self.future_logs.pop((topic, partition), None)
        if future is not None:
            future.delete()

    def replace_current_with_future(self, topic: str, partition: int) -> PartitionLog:
        """Swap in the future log, which must hold exactly what the current log holds; returns
        it, reopened under the partition's own name. Called with no await since the last copy
        step, so no append falls between. On a failed rename the current log stays (its
        directory named back) and the error is raised."""
        tp = (topic, partition)
        current, future = self.logs[tp], self.future_logs[tp]
        now_ms = self.clock.wall_ms()
        future.flush(now_ms)  # what the renamed directory holds is on disk before the old one goes
        future.close()
        old_dir, new_dir = self._dir_of[tp], future.log_dir
        retired = os.path.join(old_dir, f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
        target = os.path.join(new_dir, f"{topic}-{partition}")
        try:
            rename(current.directory, retired)
            fsync_dir(old_dir)
        except OSError as exc:
            self.health.write_failed(old_dir, f"retiring {topic}-{partition} for its move", exc)
            self.abandon_future(topic, partition)
            raise
        try:
            rename(future.directory, target)
            fsync_dir(new_dir)
        except OSError as exc:
            self.health.write_failed(new_dir, f"moving {topic}-{partition} in", exc)
            try:
                rename(retired, current.directory)
                fsync_dir(old_dir)
            except OSError as back:
                # The next start completes the move from the future log, which holds everything
                # written so far; a later append would live only in the retired directory.
                current.offline = f"its move to {new_dir} failed half-way ({exc}; {back})"
                log.error("%s-%d is offline until restart: %s", topic, partition, current.offline)
                raise
            self.abandon_future(topic, partition)
            raise
        del self.future_logs[tp]
        moved = PartitionLog(target, topic, partition, self.config_for(topic),
                             log_start_offset=current.log_start_offset, recovery_point=future.log_end_offset,
                             files=self.files, health=self.health, clock=self.clock)
        moved.load(clean_shutdown=True)
        for segment in current.segments:
            segment.delete()  # never reopened: a read in flight on the old files fails cleanly
        shutil.rmtree(retired, ignore_errors=True)
        self.logs[tp] = moved
        self._dir_of[tp] = new_dir
        self._logs_in[old_dir] -= 1
        self._logs_in[new_dir] += 1
        log.info("%s-%d moved from %s to %s at offset %d", topic, partition, old_dir, new_dir, moved.log_end_offset)
        return moved

    def reconfigure(self, topic: str) -> None:
        config = self.config_for(topic)
        for (t, _p), plog in self.logs.items():
            if t == topic:
                plog.update_config(config)

    def checkpoint(self) -> list[str]:
        """Write recovery points and log start offsets for every log dir; returns the dirs
        whose checkpoints could not be written (the old ones stay, and the failure is logged)."""
        failed = []
        for log_dir in self.log_dirs:
            tps = sorted(tp for tp, d in self._dir_of.items() if d == log_dir)
            try:
                write_checkpoint(
                    os.path.join(log_dir, RECOVERY_POINT_FILE),
                    [(t, str(p), str(self.logs[(t, p)].recovery_point)) for t, p in tps],
                )
                write_checkpoint(
                    os.path.join(log_dir, LOG_START_OFFSET_FILE),
                    [(t, str(p), str(self.logs[(t, p)].log_start_offset)) for t, p in tps],
                )
            except OSError as exc:
                self.health.write_failed(log_dir, "checkpoint", exc)
                failed.append(log_dir)
            else:
                self.health.write_succeeded(log_dir)
        return failed

    def checkpointed_high_watermark(self, topic: str, partition: int) -> int:
        """The high watermark a replica of this log resumes from: the last one checkpointed,
        within the log's bounds (its start offset when none was)."""
        plog = self.logs[(topic, partition)]
        hw = self._high_watermarks.get((topic, partition), plog.log_start_offset)
        return min(max(hw, plog.log_start_offset), plog.log_end_offset)

    def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> list[str]:
        """Write ``replication-offset-checkpoint`` in every log dir (Kafka's
        ``replica.high.watermark.checkpoint.interval.ms``); returns the dirs where it failed."""
        self._high_watermarks.update((tp, hw) for tp, hw in high_watermarks.items() if tp in self.logs)
        failed = []
        for log_dir in self.log_dirs:
            entries = sorted((t, p, hw) for (t, p), hw in self._high_watermarks.items()
                             if self._dir_of.get((t, p)) == log_dir)
            try:
                write_checkpoint(os.path.join(log_dir, HIGH_WATERMARK_FILE),
                                 [(t, str(p), str(hw)) for t, p, hw in entries])
            except OSError as exc:
                self.health.write_failed(log_dir, "high watermark checkpoint", exc)
                failed.append(log_dir)
        return failed

    def shutdown(self, broker_epoch: int = -1, high_watermarks: Mapping[TopicPartition, int] | None = None) -> None:
        """Flush and close every log, checkpoint (the high watermarks too, when given), then
        mark each dir cleanly shut down (Kafka's marker: ``{"version":0,"brokerEpoch":N}``) —
        unless something there could not be written, so that the next start recovers that dir."""
        now_ms = self.clock.wall_ms()
        # While several threads close logs, the descriptor cache must not close a segment file
        # that another thread is syncing: it stops evicting. Open descriptors stay bounded all
        # the same: each thread closes its partition's files before it takes the next one.
        self.files.limit = None
        threads = self.recovery_threads_per_data_dir * len(self.log_dirs)
        for future in self.future_logs.values():
            future.close()  # an unfinished move: dropped at the next start
        self.future_logs.clear()
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="log-shutdown") as pool:
            unclean = {d for d in pool.map(lambda tp: self._close_log(tp, now_ms), list(self.logs)) if d}
        unclean.update(self.checkpoint())
        if high_watermarks is not None:
            unclean.update(self.checkpoint_high_watermarks(high_watermarks))
        for log_dir in self.log_dirs:
            if log_dir in unclean:
                log.warning("shutdown: log dir %s is not marked clean; the next start recovers it", log_dir)
                continue
            marker = json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode()
            try:
                replace_atomically(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), marker)
            except OSError as exc:
                log.error("shutdown: clean-shutdown marker of %s not written (%s); the next start recovers it",
                          log_dir, exc)
        self.logs.clear()

    def _close_log(self, tp: TopicPartition, now_ms: int) -> str | None:
        """Flush and close one log; returns its dir if the next start must recover that dir."""
        plog = self.logs[tp]
        try:
            plog.flush(now_ms)
        except OSError as exc:
            log.error("shutdown: flushing %s-%d failed: %s", tp[0], tp[1], exc)
        plog.close()
        return self._dir_of[tp] if plog.needs_recovery else None


def _marker_broker_epoch(path: str) -> int:
    try:
        with open(path, encoding="utf-8") as fh:
            return int(json.load(fh).get("brokerEpoch", -1))
    except (OSError, ValueError, AttributeError):
        return -1  # an empty marker (older kbroker) or an unreadable one


def _offsets(path: str) -> dict[TopicPartition, int]:
    return {(t, int(p)): int(o) for t, p, o in read_checkpoint(path, 3)}
