"""A group's own configs (GROUP config resource) steer the KIP-848 coordinator: the heartbeat
interval it answers and the session timeout it arms come from consumer.heartbeat.interval.ms /
consumer.session.timeout.ms when the group sets them, else from the broker's settings."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from kbroker.groups.consumer_coordinator import ConsumerGroupCoordinator
from kbroker.groups.consumer_heartbeat import HeartbeatRequest
from kbroker.groups.group_settings import ConsumerGroupSettings

OVERRIDES = {"tuned": {"consumer.heartbeat.interval.ms": "7000", "consumer.session.timeout.ms": "50000"}}


def test_group_configs_override_the_brokers_interval_and_session_timeout() -> None:
    async def body() -> dict[str, int]:
        controller = SimpleNamespace(topics={"t": SimpleNamespace(topic_id=uuid.UUID(int=7), partitions=2)})
        c = ConsumerGroupCoordinator(ConsumerGroupSettings(heartbeat_interval_ms=5000, session_timeout_ms=45000),
                                     controller, None)  # type: ignore[arg-type]
        c.group_configs = lambda group_id: OVERRIDES.get(group_id, {})
        loop = asyncio.get_running_loop()
        seen = {}
        for group in ("tuned", "plain"):
            before = loop.time()
            answer = c.heartbeat(HeartbeatRequest(group, "m", 0, rebalance_timeout_ms=30000,
                                                  subscribed_topic_names=["t"], owned={}))
            group_state = c.group(group)
            assert group_state is not None
            timer = group_state.members["m"].session_timer
            assert timer is not None
            seen[group] = answer.heartbeat_interval_ms
            seen[group + "-session-s"] = round(timer.when() - before)
        c.stop()
        return seen

    assert asyncio.run(body()) == {"tuned": 7000, "tuned-session-s": 50, "plain": 5000, "plain-session-s": 45}
