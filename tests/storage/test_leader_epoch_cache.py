"""LeaderEpochCache answers OffsetForLeaderEpoch exactly and survives restarts."""

from kbroker.storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache


def test_end_offsets_per_epoch(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    cache.assign(0, 0)
    cache.assign(2, 10)
    cache.assign(3, 25)
    assert cache.end_offset_for(0, 40) == (0, 10)
    assert cache.end_offset_for(1, 40) == (0, 10)  # unknown epoch: largest smaller one
    assert cache.end_offset_for(2, 40) == (2, 25)
    assert cache.end_offset_for(3, 40) == (3, 40)  # latest epoch ends at the log end
    assert cache.end_offset_for(9, 40) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)  # newer than all
    assert LeaderEpochCache(str(tmp_path)).epochs == [0, 2, 3]


def test_older_than_all_ends_where_history_starts(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    assert cache.end_offset_for(1, 5) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    cache.assign(4, 100)
    # Kafka answers the requested epoch with the first known start offset (history deleted).
    assert cache.end_offset_for(3, 120) == (3, 100)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 120) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


def test_truncation_from_both_ends(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    for epoch, start in ((1, 0), (2, 10), (3, 20)):
        cache.assign(epoch, start)
    cache.truncate_from_end(15)
    assert list(zip(cache.epochs, cache.start_offsets, strict=True)) == [(1, 0), (2, 10)]
    cache.truncate_from_start(12)
    assert list(zip(cache.epochs, cache.start_offsets, strict=True)) == [(2, 12)]
    with open(tmp_path / "leader-epoch-checkpoint") as fh:
        assert fh.read() == "0\n1\n2 12\n"
