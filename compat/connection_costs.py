"""What connections cost a broker: memory per idle connection, and memory held by stalled frames.

``python -m compat.connection_costs idle --target kbroker --connections 3000`` starts the
target (``compat.targets``: real Kafka 4.3.1 or kbroker, same ``server.properties``), warms
it up, opens the connections one after another, sends one ApiVersions on each and reads every
answer, then reports the time from the first connect to the last answer and the broker's RSS
growth per connection (``VmRSS`` of ``/proc/<pid>/status`` before and after).

``python -m compat.connection_costs stalled --target kbroker --prefixes 10`` opens connections
that each send a size prefix just under ``socket.request.max.bytes`` and the first ``--body``
bytes of that frame, then stall; it waits until the broker has read them all (the kernel's
receive queue of the broker's side is empty), reports RSS and peak RSS (``VmHWM``) and how
fast another client is answered meanwhile, then closes the stalled connections and reports
how long the broker took to answer again.

Figures, not assertions: the tests in ``tests/end_to_end/test_connection_limits.py`` hold
the behaviour; these numbers go in the notes.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from compat.targets import HOST, KafkaTarget, KbrokerTarget, ProcessTarget

SOCKET_REQUEST_MAX_BYTES = 104_857_600
ANSWER_TIMEOUT_S = 60.0
# ApiVersions v0: size, api key 18, version 0, correlation id 1, client id "cc" (no body).
API_VERSIONS_V0 = struct.pack(">ihhih", 12, 18, 0, 1, 2) + b"cc"


def status_kib(pid: int, field: str) -> int:
    """A ``kB`` field of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def tcp_sockets() -> Iterator[tuple[int, int, str, int]]:
    """(local port, remote port, state, rx_queue) of every TCP socket of this network namespace
    (``/proc/net/tcp`` and ``tcp6``: a JVM's sockets are IPv6 ones, even on 127.0.0.1)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            next(fh)
            for line in fh:
                fields = line.split()
                yield (int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16), fields[3],
                       int(fields[4].split(":")[1], 16))


def receive_queue(local_port: int, remote_port: int) -> int | None:
    """Bytes the kernel holds unread for the socket on ``local_port`` connected to
    ``remote_port``; None if there is no such socket."""
    for local, remote, _state, rx_queue in tcp_sockets():
        if local == local_port and remote == remote_port:
            return rx_queue
    return None


def wait_until_read(broker_port: int, clients: list[socket.socket], timeout: float = ANSWER_TIMEOUT_S) -> None:
    """Return once the broker has read everything these clients sent (its side's receive
    queue is empty): a condition, not a delay, so it holds for Kafka and kbroker alike."""
    deadline = time.monotonic() + timeout
    for client in clients:
        port = client.getsockname()[1]
        while receive_queue(broker_port, port) != 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the broker did not read what port {port} sent")
            time.sleep(0.01)


def read_answer(sock: socket.socket) -> bytes:
    """One response frame (without its size prefix); raises ConnectionError on EOF."""
    head = _read_exact(sock, 4)
    return _read_exact(sock, struct.unpack(">i", head)[0])


def _read_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed by the broker")
        out += chunk
    return bytes(out)


def api_versions(port: int) -> float:
    """Seconds for a fresh connection's ApiVersions round trip."""
    started = time.perf_counter()
    with socket.create_connection((HOST, port), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.sendall(API_VERSIONS_V0)
        read_answer(sock)
    return time.perf_counter() - started


def make_target(name: str, workdir: Path) -> ProcessTarget:
    return KafkaTarget(workdir) if name == "kafka" else KbrokerTarget(workdir)


def measure_idle(target: ProcessTarget, connections: int) -> None:
    assert target.proc is not None
    pid = target.proc.pid
    for _ in range(200):  # warm-up: JIT, pools, first allocations
        api_versions(target.port)
    rss_before = status_kib(pid, "VmRSS")
    socks = []
    started = time.perf_counter()
    for _ in range(connections):
        socks.append(socket.create_connection((HOST, target.port), timeout=ANSWER_TIMEOUT_S))
    for sock in socks:
        sock.sendall(API_VERSIONS_V0)
    for sock in socks:
        read_answer(sock)
    elapsed = time.perf_counter() - started
    rss_after = status_kib(pid, "VmRSS")
    per_connection = (rss_after - rss_before) * 1024 / connections
    print(f"{target.name}: {connections} connections answered in {elapsed:.2f} s; RSS {rss_before / 1024:.1f} MiB "
          f"-> {rss_after / 1024:.1f} MiB: {per_connection / 1024:.1f} KiB per idle connection", flush=True)
    for sock in socks:
        sock.close()


def measure_stalled(target: ProcessTarget, prefixes: int, size: int, body: int) -> None:
    assert target.proc is not None
    pid = target.proc.pid
    api_versions(target.port)
    rss_before = status_kib(pid, "VmRSS")
    stalled = [socket.create_connection((HOST, target.port), timeout=ANSWER_TIMEOUT_S) for _ in range(prefixes)]
    for sock in stalled:
        sock.sendall(struct.pack(">i", size))
    wait_until_read(target.port, stalled)
    if body:  # separately: a broker may size its buffer when the next bytes after the prefix arrive
        for sock in stalled:
            sock.sendall(bytes(body))
        wait_until_read(target.port, stalled)
    rss_peak_stalled = status_kib(pid, "VmHWM")
    served = api_versions(target.port)
    rss_stalled = status_kib(pid, "VmRSS")
    started = time.perf_counter()
    for sock in stalled:
        sock.close()
    after_close = api_versions(target.port)
    closed_in = time.perf_counter() - started
    print(f"{target.name}: {prefixes} stalled prefixes of {size} bytes (+{body} sent): "
          f"RSS {rss_before / 1024:.1f} MiB -> {rss_stalled / 1024:.1f} MiB while stalled "
          f"(peak {rss_peak_stalled / 1024:.1f} MiB, "
          f"{status_kib(pid, 'VmHWM') / 1024:.1f} MiB after closing); "
          f"another client answered in {served * 1000:.1f} ms meanwhile; after closing them, answered "
          f"again in {after_close * 1000:.1f} ms ({closed_in:.2f} s from the first close)", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.connection_costs", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    idle = commands.add_parser("idle", help="RSS per idle connection")
    idle.add_argument("--connections", type=int, default=3000)
    stalled = commands.add_parser("stalled", help="RSS while connections stall after a size prefix")
    stalled.add_argument("--prefixes", type=int, default=10)
    stalled.add_argument("--size", type=int, default=SOCKET_REQUEST_MAX_BYTES - 1, help="declared frame size")
    stalled.add_argument("--body", type=int, default=1000, help="bytes of the frame sent before stalling")
    for command in (idle, stalled):
        command.add_argument("--target", choices=["kafka", "kbroker"], required=True)
    args = parser.parse_args(argv)
    measure: Callable[[ProcessTarget], None] = (
        (lambda target: measure_idle(target, args.connections)) if args.command == "idle"
        else (lambda target: measure_stalled(target, args.prefixes, args.size, args.body))
    )
    with tempfile.TemporaryDirectory(prefix="connection-costs-") as workdir:
        target = make_target(args.target, Path(workdir))
        target.start()
        try:
            measure(target)
        finally:
            target.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
