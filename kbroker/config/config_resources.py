"""Config resources as DescribeConfigs, AlterConfigs and IncrementalAlterConfigs name them.

Resource type codes, and the request-level checks the three APIs share (a resource named twice,
a BROKER resource naming another node, a null value), with Kafka's error codes and messages.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kbroker.protocol.codec import NO_THROTTLE, build
from kbroker.protocol.errors import ErrorCode, KafkaError

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
BROKER_LOGGER_UNSUPPORTED = "log levels cannot be changed remotely on kbroker yet"
DUPLICATE_RESOURCE = "Each resource must appear at most once."
DEFAULT_TOPIC_RESOURCE = "Default topic resources are not allowed."


def null_value_error(key: str) -> KafkaError:
    """AlterConfigs / IncrementalAlterConfigs (other than DELETE) with a null value."""
    return KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {key}")


def duplicate_resources(resources: Sequence[object]) -> set[tuple[int, str]]:
    """(type, name) of config resources named more than once in one request."""
    seen: set[tuple[int, str]] = set()
    twice: set[tuple[int, str]] = set()
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        (twice if key in seen else seen).add(key)
    return twice


def check_broker_resource(node_id: int, name: str, describing: bool = False) -> None:
    """A BROKER / BROKER_LOGGER config resource must name this node or be "" (Kafka's message
    differs between DescribeConfigs and the two alter APIs)."""
    if name == "":
        return
    try:
        broker_id = int(name)
    except ValueError:
        raise KafkaError(
            ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if broker_id != node_id:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {node_id}{' or empty string' if describing else ''}, "
            f"but received {name}",
        )


async def answer_each_resource(m: Any, response_type: type, request: Any,
                               alter: Callable[[Any], Awaitable[None]]) -> Any:
    """AlterConfigs / IncrementalAlterConfigs: run ``alter`` on each resource and answer per resource.

    A resource named twice in one request is INVALID_REQUEST for each of its entries, as in Kafka.
    """
    duplicates = duplicate_resources(request.resources)
    responses = []
    for resource in request.resources:
        error, message = ErrorCode.none, None
        try:
            if (resource.resource_type, resource.resource_name) in duplicates:
                raise KafkaError(ErrorCode.invalid_request, DUPLICATE_RESOURCE)
            await alter(resource)
        except KafkaError as exc:
            error, message = exc.code, exc.message
        responses.append(build(
            m.AlterConfigsResourceResponse,
            error_code=error,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        ))
    return build(response_type, throttle_time=NO_THROTTLE, responses=tuple(responses))
