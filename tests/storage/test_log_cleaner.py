"""LogCleaner on real directories: convergence, offsets, tombstones, dirty ratio and lags,
transactions, idempotent producers, and start-up recovery from every leftover-file state."""

from __future__ import annotations

import asyncio
import gzip
import os
import random
import shutil
import time

import pytest
from kbroker.protocol.record_builder import build_batch, encode_record
from kbroker.protocol.records import TRANSACTIONAL_FLAG, iter_records, read_header
from kbroker.storage.log import PartitionLog
from kbroker.storage.log_cleaner import CLEANER_CHECKPOINT_FILE, CleaningAborted, LogCleaner
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.storage.segment import segment_file_name

NOW = int(time.time() * 1000)
DAY = 86_400_000


def config(**overrides) -> LogConfig:
    base = dict(compact=True, delete=False, segment_bytes=4096, min_cleanable_ratio=0.0, file_delete_delay_ms=0)
    base.update(overrides)
    return LogConfig(**base)


def open_manager(path, cfg: LogConfig) -> tuple[LogManager, PartitionLog]:
    manager = LogManager([str(path)], lambda _topic: cfg)
    manager.startup()
    plog = manager.get("t", 0) or manager.create("t", 0, "id")
    return manager, plog


def put(plog: PartitionLog, records: list[tuple[bytes, bytes | None]], ts: int = NOW, **batch_args) -> int:
    raw = memoryview(bytearray(build_batch(records, base_timestamp=ts, **batch_args)))
    return plog.append_as_leader(raw, 0, ts).first_offset


def read_all(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for raw in plog.iter_batches() for r in iter_records(raw)]


def clean(manager: LogManager, plog: PartitionLog, now: int = NOW):
    async def run():
        return await LogCleaner(manager).clean_log(plog, now)
    return asyncio.run(run())


def workload(plog: PartitionLog, seed: int = 7, keys: int = 40, batches: int = 400):
    """Random keyed overwrites and tombstones; returns key -> (offset, value) of the latest."""
    rng = random.Random(seed)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for i in range(batches):
        records = []
        for j in range(rng.randint(1, 4)):
            key = b"key-%d" % rng.randrange(keys)
            value = None if rng.random() < 0.1 else b"v%d-%d" % (i, j) * 3
            records.append((key, value))
        first = put(plog, records)
        for j, (key, value) in enumerate(records):
            latest[key] = (first + j, value)
    plog.roll()
    return latest


def test_keyed_workload_converges_with_offsets_preserved(tmp_path):
    manager, plog = open_manager(tmp_path, config())
    latest = workload(plog)
    end = plog.log_end_offset
    segments_before, bytes_before, records_before = len(plog.segments), plog.size_in_bytes, len(read_all(plog))
    stats = clean(manager, plog)
    after = read_all(plog)
    print(f"keys={len(latest)} records {records_before}->{len(after)} bytes {bytes_before}->{plog.size_in_bytes} "
          f"segments {segments_before}->{len(plog.segments)}")
    assert stats is not None and stats.records_after == len(after)
    offsets = [o for o, _k, _v in after]
    assert offsets == sorted(set(offsets))
    # Exactly one record per key, the latest, at its original offset (tombstones kept for now).
    assert {k: (o, v) for o, k, v in after} == latest
    assert len(after) == len(latest)
    assert plog.log_end_offset == end
    # Groups are formed from the sizes before cleaning; the next cleaning merges the small results.
    assert len(plog.segments) == segments_before
    clean(manager, plog)
    assert read_all(plog) == after
    for segment in plog.segments:  # the worker-built index points at batch starts
        for offset, position in zip(segment.offset_index.offsets, segment.offset_index.positions, strict=True):
            assert read_header(segment.read_bytes(position, 61)).last_offset == offset
    assert all(s.size <= 4096 for s in plog.segments) and len(plog.segments) < segments_before
    # Fetching from any offset, gaps included, lands on the next surviving batch.
    for offset in range(0, end, 37):
        fetched = plog.read(offset, 1 << 20, end, True)
        if fetched is not None:
            first = read_header(fetched.segment.read_bytes(fetched.position, 61))
            assert first.last_offset >= offset
    # The checkpoint moved to the end of the cleaned range and survives a restart.
    with open(tmp_path / CLEANER_CHECKPOINT_FILE) as fh:
        assert fh.read().splitlines()[2] == f"t 0 {stats.end_offset}"
    manager.shutdown()
    manager, plog = open_manager(tmp_path, config())
    assert read_all(plog) == after
    manager.shutdown()


def test_tombstones_go_after_delete_retention(tmp_path):
    manager, plog = open_manager(tmp_path, config(delete_retention_ms=DAY))
    put(plog, [(b"a", b"1"), (b"b", b"1")])
    put(plog, [(b"a", None), (b"c", b"1")])
    plog.roll()
    clean(manager, plog, NOW)
    assert read_all(plog) == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")]
    cleaner = LogCleaner(manager)
    asyncio.run(cleaner.clean_log(plog, NOW + 1000))
    assert (2, b"a", None) in read_all(plog)  # horizon not reached: still there
    # Nothing dirty, but the kept tombstone's horizon has passed: the cleaner picks the log.
    assert asyncio.run(cleaner.clean_once(NOW + 2000)) is None
    stats = asyncio.run(cleaner.clean_once(NOW + DAY + 10))
    assert stats is not None
    assert read_all(plog) == [(1, b"b", b"1"), (3, b"c", b"1")]
    manager.shutdown()


def test_dirty_ratio_and_compaction_lags(tmp_path):
    manager, plog = open_manager(tmp_path, config(min_cleanable_ratio=0.5))
    workload(plog, batches=200)
    cleaner = LogCleaner(manager)
    assert asyncio.run(cleaner.clean_once(NOW)) is not None
    assert asyncio.run(cleaner.clean_once(NOW)) is None  # all clean now
    put(plog, [(b"key-1", b"x")])
    plog.roll()  # a little dirt: below the 0.5 ratio
    assert asyncio.run(cleaner.clean_once(NOW)) is None
    # max.compaction.lag.ms: dirt older than the lag must be cleaned whatever the ratio.
    plog.update_config(config(min_cleanable_ratio=0.5, max_compaction_lag_ms=1000))
    assert asyncio.run(cleaner.clean_once(NOW + 5000)) is not None
    assert [r for r in read_all(plog) if r[1] == b"key-1"] == [(plog.log_end_offset - 1, b"key-1", b"x")]
    # min.compaction.lag.ms: records younger than the lag are not cleanable.
    put(plog, [(b"key-2", b"y")], ts=NOW + 10_000)
    plog.roll()
    plog.update_config(config(min_compaction_lag_ms=60_000))
    assert asyncio.run(cleaner.clean_once(NOW + 20_000)) is None
    assert asyncio.run(cleaner.clean_once(NOW + 80_000)) is not None
    manager.shutdown()


def test_aborted_transactions_and_markers_are_removed(tmp_path):
    manager, plog = open_manager(tmp_path, config(delete_retention_ms=1000))
    txn = dict(attributes=TRANSACTIONAL_FLAG, producer_epoch=0)
    put(plog, [(b"a", b"committed")], producer_id=7, base_sequence=0, **txn)
    plog.append_end_txn_marker(7, 0, True, 0, 0, NOW)
    put(plog, [(b"a", b"aborted"), (b"b", b"aborted")], producer_id=7, base_sequence=1, **txn)
    marker = plog.append_end_txn_marker(7, 0, False, 0, 0, NOW)
    put(plog, [(b"c", b"plain")])
    # A later transaction, so the aborted batch is not the producer's last (that one would stay
    # as an empty header, and keep its marker, as in Kafka).
    put(plog, [(b"d", b"committed")], producer_id=7, base_sequence=3, **txn)
    plog.append_end_txn_marker(7, 0, True, 0, 0, NOW)
    plog.roll()
    clean(manager, plog)
    values = [(k, v) for _o, k, v in read_all(plog)]
    assert (b"a", b"committed") in values and (b"c", b"plain") in values
    assert (b"a", b"aborted") not in values and (b"b", b"aborted") not in values
    # The abort marker stays while it may still be needed (it is indexed for read_committed).
    assert any(e.last_offset == marker for s in plog.segments for e in s.txn_index.entries)
    cleaner = LogCleaner(manager)
    asyncio.run(cleaner.clean_log(plog, NOW + 10))  # no aborted records left: horizon set
    asyncio.run(cleaner.clean_log(plog, NOW + 5000))  # past the horizon: markers go
    control = [read_header(raw) for raw in plog.iter_batches() if read_header(raw).is_control]
    assert marker not in [h.last_offset for h in control]
    assert len(control) == 2  # the commit markers stay: their transactions still have records
    assert not any(e.last_offset == marker for s in plog.segments for e in s.txn_index.entries)
    manager.shutdown()


def test_last_batch_of_idempotent_producer_survives_as_empty_header(tmp_path):
    manager, plog = open_manager(tmp_path, config())
    first = put(plog, [(b"a", b"1"), (b"b", b"1")], producer_id=9, producer_epoch=0, base_sequence=0)
    put(plog, [(b"a", b"2"), (b"b", b"2")])
    plog.roll()
    clean(manager, plog)
    headers = [read_header(raw) for raw in plog.iter_batches()]
    kept = [h for h in headers if h.producer_id == 9]
    assert len(kept) == 1 and kept[0].record_count == 0
    assert (kept[0].base_offset, kept[0].last_offset, kept[0].base_sequence) == (first, first + 1, 0)
    # A retry of that batch is still answered as a duplicate with its original offsets.
    retry = memoryview(bytearray(build_batch([(b"a", b"1"), (b"b", b"1")], base_timestamp=NOW, producer_id=9,
                                             producer_epoch=0, base_sequence=0)))
    assert plog.append_as_leader(retry, 0, NOW).first_offset == first
    manager.shutdown()


def test_fetch_holding_a_replaced_segment_still_reads_it(tmp_path):
    manager, plog = open_manager(tmp_path, config(file_delete_delay_ms=60_000))
    workload(plog, batches=100)
    held = plog.read(0, 1 << 20, plog.log_end_offset, True)
    before = held.segment.read_bytes(held.position, held.length)

    async def run():
        await LogCleaner(manager).clean_log(plog, NOW)
        return held.segment.read_bytes(held.position, held.length)

    assert asyncio.run(run()) == before
    assert held.segment not in plog.segments
    manager.shutdown()


# --- recovery from a crash at each step of the swap --------------------------------------------


def crash_states(tmp_path):
    """An uncleaned log (closed uncleanly) and the same log cleaned in a copy."""
    _manager, plog = open_manager(tmp_path / "a", config(segment_bytes=1 << 20))
    cfg = config(segment_bytes=2048)
    plog.update_config(cfg)
    workload(plog, batches=150)
    for segment in plog.segments:
        segment.fsync()
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    cleaned_manager, cleaned = open_manager(tmp_path / "b", config(segment_bytes=1 << 20))
    clean(cleaned_manager, cleaned)
    expected = read_all(cleaned)
    assert len(cleaned.segments) == 2  # one cleaned group (base 0) and the empty active segment
    cleaned_manager.shutdown()
    return tmp_path / "a" / "t-0", tmp_path / "b" / "t-0", expected, [s.base_offset for s in plog.segments]


def reopen_after_crash(path) -> list[tuple[int, bytes | None, bytes | None]]:
    manager, plog = open_manager(path.parent, config())
    names = os.listdir(path)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    records = read_all(plog)
    manager.shutdown()
    return records


def test_recovery_deletes_leftover_cleaned_files(tmp_path):
    old, new, _expected, _bases = crash_states(tmp_path)
    original = reopen_after_crash(old)
    shutil.copy(new / segment_file_name(0, ".log"), old / (segment_file_name(0, ".log") + ".cleaned"))
    shutil.copy(new / segment_file_name(0, ".txnindex"), old / (segment_file_name(0, ".txnindex") + ".cleaned"))
    assert reopen_after_crash(old) == original


def test_recovery_completes_swap_with_old_segments_intact(tmp_path):
    old, new, expected, _bases = crash_states(tmp_path)
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        shutil.copy(new / segment_file_name(0, suffix), old / (segment_file_name(0, suffix) + ".swap"))
    assert reopen_after_crash(old) == expected


def test_recovery_completes_swap_with_old_segments_partly_deleted(tmp_path):
    old, new, expected, bases = crash_states(tmp_path)
    shutil.copy(new / segment_file_name(0, ".log"), old / (segment_file_name(0, ".log") + ".swap"))
    shutil.copy(new / segment_file_name(0, ".txnindex"), old / (segment_file_name(0, ".txnindex") + ".swap"))
    for base in bases[:3]:
        for suffix in (".log", ".index", ".timeindex"):
            os.unlink(old / segment_file_name(base, suffix))
    assert reopen_after_crash(old) == expected


def test_recovery_completes_swap_after_txnindex_rename(tmp_path):
    old, new, expected, bases = crash_states(tmp_path)
    for base in bases[:-1]:
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            if os.path.exists(old / segment_file_name(base, suffix)):
                os.unlink(old / segment_file_name(base, suffix))
    shutil.copy(new / segment_file_name(0, ".txnindex"), old / segment_file_name(0, ".txnindex"))
    shutil.copy(new / segment_file_name(0, ".log"), old / (segment_file_name(0, ".log") + ".swap"))
    assert reopen_after_crash(old) == expected


def test_compressed_batch_partly_kept_is_rewritten_readable(tmp_path):
    manager, plog = open_manager(tmp_path, config())
    records = [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")]
    body = b"".join(encode_record(i, 0, k, v) for i, (k, v) in enumerate(records))
    put(plog, records, attributes=1, compressed_records=gzip.compress(body))
    put(plog, [(b"a", b"2")])
    plog.roll()
    clean(manager, plog)
    assert read_all(plog) == [(1, b"b", b"1"), (2, b"c", b"1"), (3, b"a", b"2")]
    first = read_header(next(plog.iter_batches()))
    assert (first.base_offset, first.last_offset, first.record_count, first.compression) == (0, 2, 2, 0)
    manager.shutdown()


def test_appends_during_cleaning_keep_every_latest_value(tmp_path):
    manager, plog = open_manager(tmp_path, config())
    latest = workload(plog, batches=300)

    async def run():
        task = asyncio.create_task(LogCleaner(manager).clean_log(plog, NOW))
        i = 0
        while not task.done():  # appends and rolls interleave with the worker thread
            key = b"key-%d" % (i % 40)
            latest[key] = (put(plog, [(key, b"during-%d" % i)]), b"during-%d" % i)
            if i % 50 == 0:
                plog.roll()
            i += 1
            await asyncio.sleep(0)
        return await task

    assert asyncio.run(run()) is not None
    final: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in read_all(plog):
        final[key] = (offset, value)
    assert final == latest
    manager.shutdown()


def test_cleaning_is_abandoned_when_retention_or_deletion_changes_the_log(tmp_path):
    manager, plog = open_manager(tmp_path, config(delete=True, retention_ms=DAY))
    workload(plog, batches=200)
    before = read_all(plog)
    bases = [s.base_offset for s in plog.segments]

    async def clean_while(change) -> None:
        task = asyncio.create_task(LogCleaner(manager).clean_log(plog, NOW))
        await asyncio.sleep(0)  # the cleaning has taken its snapshot and its worker runs
        change()
        with pytest.raises(CleaningAborted):
            await task

    # Retention (compact,delete) drops the oldest segments meanwhile: nothing is swapped.
    asyncio.run(clean_while(lambda: plog.enforce_retention(NOW + 2 * DAY, plog.log_end_offset)))
    assert not [n for n in os.listdir(plog.directory) if n.endswith((".cleaned", ".swap"))]
    assert [s.base_offset for s in plog.segments] == bases[-1:]
    assert read_all(plog) == [r for r in before if r[0] >= bases[-1]]
    manager.shutdown()
    manager, plog = open_manager(tmp_path / "other", config())
    workload(plog, batches=200)
    asyncio.run(clean_while(lambda: manager.delete("t", 0)))
    assert not os.path.exists(plog.directory)
    manager.shutdown()
