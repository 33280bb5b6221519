"""Brokers, topics with their partitions, and connected clients, as JSON-ready dicts.

Registrations (leader, replicas, ISR, ELR, epochs) are the metadata image's; offsets (HW, LEO,
LSO, log start) and sizes are this broker's replica's, null where it holds none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbroker.node.broker import Broker

JSON = dict[str, Any]


def brokers(broker: Broker) -> JSON:
    """The registered brokers (fenced ones too), who the active controller is, and this
    broker's log dirs."""
    lifecycle = broker.lifecycle
    image = lifecycle.image if lifecycle is not None else None
    rows = []
    for registration in sorted(image.brokers.values(), key=lambda b: b.broker_id) if image else []:
        rows.append({
            "id": registration.broker_id, "rack": registration.rack, "fenced": registration.fenced,
            "epoch": registration.broker_epoch,
            "endpoints": [{"listener": name, "host": host, "port": port}
                          for name, host, port in registration.endpoints]
            or [{"listener": "", "host": registration.host, "port": registration.port}],
        })
    log_dirs = [{"path": path, "partitions": sum(1 for key in broker.log_manager.logs
                                                 if broker.log_manager.dir_of(*key) == path)}
                for path in broker.log_manager.log_dirs]
    return {
        "cluster_id": broker.cluster_id, "this_broker": broker.node_id,
        # The active controller as this broker's lifecycle last found it (the quorum leader).
        "active_controller": lifecycle.controller_id if lifecycle is not None else None,
        "metadata_offset": image.offset if image else -1,
        "brokers": rows, "log_dirs": log_dirs,
    }


def _replica_offsets(broker: Broker, topic: str, index: int) -> JSON:
    partition = broker.replica_manager.partitions.get((topic, index))
    if partition is None:
        return {"high_watermark": None, "log_end_offset": None, "last_stable_offset": None,
                "log_start_offset": None, "size_bytes": None, "segments": None}
    return {
        "high_watermark": partition.high_watermark, "log_end_offset": partition.log_end_offset,
        "last_stable_offset": partition.last_stable_offset, "log_start_offset": partition.log_start_offset,
        "size_bytes": partition.log.size_in_bytes, "segments": len(partition.log.segments),
    }


def topics(broker: Broker, include_internal: bool = True) -> JSON:
    """Every topic with its partition count and, summed over this broker's replicas, the
    records it holds (sum of high watermark minus log start) and its size."""
    lifecycle = broker.lifecycle
    out = []
    for name, image in sorted(lifecycle.image.topics.items()) if lifecycle is not None else []:
        if not include_internal and name.startswith("__"):
            continue
        offsets = [_replica_offsets(broker, name, index) for index in image.partitions]
        held = [o for o in offsets if o["high_watermark"] is not None]
        out.append({
            "name": name, "topic_id": str(image.topic_id), "partitions": len(image.partitions),
            "replication_factor": max((len(p.replicas) for p in image.partitions.values()), default=0),
            "under_replicated": sum(1 for p in image.partitions.values() if len(p.isr) < len(p.replicas)),
            "offline": sum(1 for p in image.partitions.values() if p.leader < 0),
            "records": sum(o["high_watermark"] - o["log_start_offset"] for o in held) if held else None,
            "size_bytes": sum(o["size_bytes"] for o in held) if held else None,
        })
    return {"topics": out}


def topic(broker: Broker, name: str) -> JSON | None:
    """One topic: each partition's registration and this broker's offsets for it, and the
    topic's configs as DescribeConfigs resolves them (value and source)."""
    lifecycle = broker.lifecycle
    image = lifecycle.image.topics.get(name) if lifecycle is not None else None
    if image is None:
        return None
    partitions = []
    for index, reg in sorted(image.partitions.items()):
        partitions.append({
            "partition": index, "leader": reg.leader, "leader_epoch": reg.leader_epoch,
            "partition_epoch": reg.partition_epoch, "replicas": list(reg.replicas), "isr": list(reg.isr),
            "elr": list(reg.elr), "last_known_elr": list(reg.last_known_elr),
            "adding": list(reg.adding), "removing": list(reg.removing),
            **_replica_offsets(broker, name, index),
        })
    configs = [{"name": entry.name, "value": entry.value, "source": entry.source.name}
               for entry in sorted(broker.controller.resolved_configs(name).values(), key=lambda e: e.name)]
    return {"name": name, "topic_id": str(image.topic_id), "partitions": partitions, "configs": configs,
            "this_broker": broker.node_id}


def _api_name(broker: Broker, api_key: int) -> str:
    """The API's name as its handler module is named (``api_versions``, ``produce``)."""
    handler = broker.dispatcher.handlers.get(api_key)
    return handler.__name__.rsplit(".", 1)[-1] if handler is not None else str(api_key)


def clients(broker: Broker) -> JSON:
    """The clients connected to this broker now: their software (ApiVersions v3), listener,
    principal and the API versions they used."""
    rows = []
    for client in broker.dispatcher.clients.connected():
        rows.append({
            "client_id": client.client_id, "address": client.peer, "listener": client.listener,
            "principal": client.principal, "software_name": client.software_name,
            "software_version": client.software_version,
            "apis": [{"api": _api_name(broker, key), "api_key": key, "version": version}
                     for key, version in sorted(client.api_versions)],
        })
    return {"clients": rows, "this_broker": broker.node_id}
