"""New logs of partitions this broker is to lead get their leader epoch with their other files.

ReplicaManager.create_logs writes the ``leader-epoch-checkpoint`` of each new log it is to lead
on LogManager's writer threads, so becoming leader afterwards writes no file on the event loop.
The epoch must be exactly what becoming leader would have recorded (the epoch at offset 0),
followers' logs get none (they learn epochs from their leader), and a log whose checkpoint the
disk refuses is left out with no directory, for the ordinary path to meet and report the error.
"""

from __future__ import annotations

import asyncio
import errno
import os
import uuid

import pytest
from kbroker.replication.quorum.partition_registration import PartitionRegistration
from kbroker.replication.replica_manager import ReplicaManager
from kbroker.storage import file_io
from kbroker.storage.file_io import FailPoint, inject
from kbroker.storage.leader_epoch_cache import CHECKPOINT_FILE
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager

TOPIC_ID = uuid.UUID(int=7)
BROKER = 1
EPOCH = 5


pytestmark = pytest.mark.usefixtures("no_failpoints_left")


def registration(leader: int) -> PartitionRegistration:
    return PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=leader, leader_epoch=EPOCH,
                                 partition_epoch=0)


def new_replicas(tmp_path) -> tuple[LogManager, ReplicaManager]:
    log_manager = LogManager([str(tmp_path)], lambda _topic: LogConfig())
    log_manager.startup()
    return log_manager, ReplicaManager(log_manager, BROKER)


def test_led_logs_carry_their_epoch_and_becoming_leader_keeps_it(tmp_path):
    log_manager, replicas = new_replicas(tmp_path)
    # partitions 0, 3, 6, 9 led here, the others followed
    regs = {index: registration(BROKER if index % 3 == 0 else 2) for index in range(10)}
    asyncio.run(replicas.create_logs([("t", index, TOPIC_ID, reg) for index, reg in regs.items()]))
    for index, reg in regs.items():
        checkpoint = tmp_path / f"t-{index}" / CHECKPOINT_FILE
        if reg.leader == BROKER:
            assert checkpoint.read_text() == f"0\n1\n{EPOCH} 0\n"
        else:
            assert not checkpoint.exists()
    for index, reg in regs.items():
        replicas.apply_partition("t", index, TOPIC_ID, reg)
    led = replicas.get_partition("t", 0)
    assert led.is_leader and led.leader_epoch == EPOCH
    cache = led.log.leader_epoch_cache
    assert (cache.epochs, cache.start_offsets) == ([EPOCH], [0])
    # the same file as a log made the ordinary way (one new replica, created on becoming leader)
    replicas.apply_partition("t", 10, TOPIC_ID, registration(BROKER))
    ordinary = (tmp_path / "t-10" / CHECKPOINT_FILE).read_text()
    assert (tmp_path / "t-0" / CHECKPOINT_FILE).read_text() == ordinary == f"0\n1\n{EPOCH} 0\n"
    log_manager.shutdown()


def test_a_led_log_whose_checkpoint_the_disk_refuses_is_left_out(tmp_path):
    log_manager, replicas = new_replicas(tmp_path)
    inject(FailPoint("open", errno.ENOSPC, path_contains=f"t-2{os.sep}{CHECKPOINT_FILE}", times=0))
    asyncio.run(replicas.create_logs([("t", index, TOPIC_ID, registration(BROKER)) for index in range(4)]))
    assert sorted(log_manager.logs) == [("t", 0), ("t", 1), ("t", 3)]
    assert not os.path.exists(tmp_path / "t-2")
    with pytest.raises(OSError) as refused:
        replicas.apply_partition("t", 2, TOPIC_ID, registration(BROKER))  # the ordinary way meets the error
    assert refused.value.errno == errno.ENOSPC
    file_io.clear_failpoints()
    log_manager.shutdown()
