"""One module per Kafka API. Each declares ``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION`` and
``async def handle(ctx, request)``, and opens with a docstring listing its behaviour and any
deviation from Kafka. ``HANDLERS`` is the single table ApiVersions is answered from: an API is
advertised exactly when it has a handler here.
"""

from __future__ import annotations

from types import ModuleType

from . import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from . import alter_configs as alter_configs

_MODULES: list[ModuleType] = [
    produce,
    fetch,
    list_offsets,
    metadata,
    offset_commit,
    offset_fetch,
    find_coordinator,
    join_group,
    heartbeat,
    leave_group,
    sync_group,
    describe_groups,
    list_groups,
    api_versions,
    create_topics,
    delete_topics,
    delete_records,
    init_producer_id,
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    write_txn_markers,
    txn_offset_commit,
    offset_for_leader_epoch,
    describe_configs,
    alter_configs,
    describe_log_dirs,
    create_partitions,
    incremental_alter_configs,
    describe_cluster,
    describe_topic_partitions,
    describe_producers,
    describe_transactions,
    list_transactions,
    delete_groups,
    offset_delete,
    consumer_group_heartbeat,
    consumer_group_describe,
]

HANDLERS: dict[int, ModuleType] = {m.API_KEY: m for m in _MODULES}
