"""The APIs a controller node answers on its controller listener (one module per API).

Brokers register and heartbeat here, follow the metadata log with Fetch, report ISR changes
with AlterPartition, forward topic and config changes, and take producer id blocks; voters
exchange Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch to replicate the metadata log;
Kafka's cluster tools (``--bootstrap-controller``) describe the quorum, update finalized
features and unregister brokers.
A controller that is not the quorum's leader answers brokers NOT_CONTROLLER. A
controller node answers nothing else: a client pointed at it sees these APIs in ApiVersions.
"""

from __future__ import annotations

from types import ModuleType

from . import (
    allocate_producer_ids,
    alter_client_quotas,
    alter_partition,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    api_versions,
    begin_quorum_epoch,
    broker_heartbeat,
    broker_registration,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_topics,
    describe_cluster,
    describe_quorum,
    elect_leaders,
    end_quorum_epoch,
    fetch_snapshot,
    incremental_alter_configs,
    list_partition_reassignments,
    metadata_fetch,
    unregister_broker,
    update_features,
    vote,
)

CONTROLLER_HANDLERS: dict[int, ModuleType] = {
    m.API_KEY: m
    for m in (
        alter_client_quotas, alter_user_scram_credentials,
        api_versions, allocate_producer_ids, alter_partition, alter_partition_reassignments, begin_quorum_epoch,
        broker_heartbeat, broker_registration, create_acls, create_partitions, create_topics, delete_acls,
        delete_topics, describe_cluster, describe_quorum, elect_leaders, end_quorum_epoch, fetch_snapshot,
        incremental_alter_configs, list_partition_reassignments, metadata_fetch, unregister_broker, update_features,
        vote,
    )
}
