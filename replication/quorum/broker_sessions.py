"""BrokerSessions: when the active controller must fence each broker it has not heard from.

A broker's session lasts ``broker.session.timeout.ms`` from its last heartbeat (or
registration), as in Kafka's BrokerHeartbeatManager. kbroker adds a second, shorter deadline
(``kbroker.broker.disconnect.fence.ms``): when the connection that carried a broker's last
heartbeat is closed by the broker's side (a crashed process's sockets are closed by its kernel,
so the controller reads end-of-file or a reset) and no heartbeat or registration from the broker
follows within that grace, its session ends then, without waiting out the session timeout. A
network partition closes nothing, so it still waits the whole session. The grace is there for a
live broker whose connection broke for another reason: it reconnects with its next heartbeat.
``disconnect_fence_ms`` of 0 or less turns the shorter deadline off. A broker that reaches the
controller in process (a combined node's own broker) has no connection (``None``) and only the
session timeout applies to it.

Everything here is bookkeeping on times the caller passes in (milliseconds on one clock); the
QuorumController decides what fencing means for partitions (``broker_fencing``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(slots=True)
class _Session:
    last_contact_ms: int
    connection: str | None  # the connection that carried the last contact (None: in process)
    disconnected_ms: int | None = None  # when that connection was closed by the broker's side


class BrokerSessions:
    def __init__(self, session_timeout_ms: int, disconnect_fence_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.disconnect_fence_ms = disconnect_fence_ms
        self._sessions: dict[int, _Session] = {}

    def reset(self, broker_ids: Iterable[int], now_ms: int) -> None:
        """A newly active controller: every broker gets a full session, and no connection is
        known until the broker's next heartbeat (those it sent another controller were not seen)."""
        self._sessions = {broker_id: _Session(now_ms, None) for broker_id in broker_ids}

    def touch(self, broker_id: int, now_ms: int, connection: str | None) -> None:
        """A heartbeat or registration arrived on ``connection``: a new session deadline, and any
        pending disconnect is forgotten (the broker is back in contact)."""
        self._sessions[broker_id] = _Session(now_ms, connection)

    def connection_closed(self, connection: str, now_ms: int) -> list[int]:
        """The broker side closed ``connection``: the brokers whose heartbeats it carried."""
        closed = []
        for broker_id, session in self._sessions.items():
            if session.connection == connection and session.disconnected_ms is None:
                session.disconnected_ms = now_ms
                closed.append(broker_id)
        return closed

    def deadline_ms(self, broker_id: int) -> int:
        """When the broker's session ends unless it is heard from again."""
        session = self._sessions.get(broker_id)
        if session is None:
            return self.session_timeout_ms  # never heard from by this controller: from time 0
        deadline = session.last_contact_ms + self.session_timeout_ms
        if session.disconnected_ms is not None and self.disconnect_fence_ms > 0:
            deadline = min(deadline, session.disconnected_ms + self.disconnect_fence_ms)
        return deadline

    def expiry_reason(self, broker_id: int, now_ms: int) -> str | None:
        """Why the broker's session has ended at ``now_ms`` (a log line's words), None if it has not."""
        if now_ms < self.deadline_ms(broker_id):
            return None
        session = self._sessions.get(broker_id)
        if session is None:
            return f"no heartbeat for {now_ms} ms"
        if session.disconnected_ms is not None and now_ms - session.last_contact_ms < self.session_timeout_ms:
            return (f"its controller connection {session.connection} was closed "
                    f"{now_ms - session.disconnected_ms} ms ago and it did not reconnect")
        return f"no heartbeat for {now_ms - session.last_contact_ms} ms"

    def next_deadline_ms(self, broker_ids: Iterable[int]) -> int | None:
        """The earliest deadline among ``broker_ids`` (the unfenced brokers), None if there are none."""
        return min((self.deadline_ms(b) for b in broker_ids), default=None)
