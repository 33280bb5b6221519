"""Listening ports for the nodes tests and benchmarks start on loopback.

A port from ``bind(port 0)`` comes from the kernel's ephemeral range, the same range every outgoing
connection takes its local port from. Between that probe and the node's own ``bind``, a client
connection anywhere on the machine can take the port, and the node then exits with EADDRINUSE
(seen in CI: one broker of a three-broker cluster never started, and the other two waited for it).
So ports are taken from below the ephemeral range, where the kernel never picks a local port by
itself. Each process walks a slice of its own (one per pytest-xdist worker), from a random start,
and hands out a port only if nothing is bound to it right now.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

LOWEST_PORT = 10000
SLICES = 16  # xdist workers take slices 0..11, other processes 12..15
PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_range_start() -> int:
    """The first port of the kernel's ephemeral range (Linux's default if it cannot be read)."""
    try:
        return int(PORT_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def slice_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...
    if worker.startswith("gw") and worker[2:].isdigit():
        return int(worker[2:]) % 12
    return 12 + os.getpid() % 4


class PortWalk:
    """The ports of one slice below the ephemeral range, walked in order from a random start."""

    def __init__(self) -> None:
        top = ephemeral_range_start()
        width = (top - LOWEST_PORT) // SLICES
        self.usable = width >= 100  # an unusual ephemeral range: fall back to the kernel's choice
        self.first = LOWEST_PORT + slice_index() * width
        self.width = max(width, 1)
        self.offset = random.randrange(self.width)
        self.pid = os.getpid()

    def next_free(self, host: str) -> int:
        if not self.usable:
            return kernel_chosen_port(host)
        for _ in range(self.width):
            port = self.first + self.offset
            self.offset = (self.offset + 1) % self.width
            if bindable(host, port):
                return port
        raise OSError(f"no free port on {host} in {self.first}..{self.first + self.width - 1}")


def bindable(host: str, port: int) -> bool:
    """Whether a listener could bind ``host:port`` now. Without SO_REUSEADDR, so a port a recent
    connection still holds in TIME_WAIT is passed over too."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def kernel_chosen_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


_walk: PortWalk | None = None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` (a loopback address) that nothing is bound to right now and that no
    outgoing connection will take by itself."""
    global _walk
    if _walk is None or _walk.pid != os.getpid():  # a forked child starts a walk of its own
        _walk = PortWalk()
    return _walk.next_free(host)
