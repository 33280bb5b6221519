"""A template process that forks kbroker nodes for tests, so each start skips the imports.

Nine tenths of a cold ``kbroker serve`` start is importing kio's message classes and the
handlers (about 0.6 s here). This process imports them once (:func:`serve_forever`) and then
forks one child per node asked for; the child runs ``kbroker serve`` with its output in a log
file. Each node is still a process of its own, so ``kill -9`` is a real crash of that node alone
and the test's clients never share its event loop or GIL. The template has no thread and no
event loop when it forks, which is what makes forking it safe.

Protocol, one JSON object per line: the parent writes ``{"argv": [...], "log": path}`` and reads
``{"pid": n}``; whenever a child exits the template writes ``{"exited": pid, "status": code}``.
When its standard input closes (the test process ended), it kills the nodes it started and exits.
:class:`Zygote` is the parent's side.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from typing import IO, Any


def _child(argv: list[str], log: str) -> None:
    """Runs in the forked child: become the node, never return."""
    code: Any = 1
    try:
        os.setsid()  # a Ctrl-C meant for the test runner is not the node's
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.closerange(3, 256)  # the template's pipes; kbroker opens its own files afterwards
        from kbroker.cli import main

        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)


def serve_forever() -> None:
    """The template's loop: fork on request, report exits, stop when the parent goes away."""
    import kbroker.cli  # noqa: F401 (the point of this process: import once, fork many)

    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    children: set[int] = set()
    _send({"ready": True})
    while True:
        readable, _, _ = select.select([sys.stdin, wake_read], [], [])
        if wake_read in readable:
            os.read(wake_read, 512)
            _reap(children)
        if sys.stdin not in readable:
            continue
        line = sys.stdin.readline()
        if not line:
            for pid in children:
                os.kill(pid, signal.SIGKILL)
            return
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request["argv"], request["log"])
        children.add(pid)
        _send({"pid": pid})


def _reap(children: set[int]) -> None:
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        children.discard(pid)
        _send({"exited": pid, "status": os.waitstatus_to_exitcode(status)})


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class Zygote:
    """The parent's side: one template process per test process, started on first use."""

    _instance: Zygote | None = None
    _instance_lock = threading.Lock()

    @classmethod
    def shared(cls) -> Zygote:
        with cls._instance_lock:
            if cls._instance is None or cls._instance.proc.poll() is not None:
                cls._instance = cls()
            return cls._instance

    def __init__(self) -> None:
        # -c rather than -m: the package imports this module first, and runpy warns about that.
        self.proc = subprocess.Popen([sys.executable, "-c", "from kbroker.testing.zygote import serve_forever; "
                                      "serve_forever()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self._stdin: IO[str] = self.proc.stdin
        self._lock = threading.Lock()  # one fork request at a time
        self._changed = threading.Condition()
        self._pids: list[int] = []
        self._exits: dict[int, int] = {}
        self._ready = False
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True,
                                        name="kbroker-zygote-reader")
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            message = json.loads(line)
            with self._changed:
                if "ready" in message:
                    self._ready = True
                elif "pid" in message:
                    self._pids.append(message["pid"])
                else:
                    self._exits[message["exited"]] = message["status"]
                self._changed.notify_all()
        with self._changed:  # the template is gone: wake every waiter
            self._changed.notify_all()

    def _wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: condition() or self.proc.poll() is not None, timeout):
                raise TimeoutError(f"kbroker test template: no {what} within {timeout:.0f} s")
            if not condition():
                raise RuntimeError(f"kbroker test template exited ({self.proc.returncode}) before {what}")

    def start(self, argv: list[str], log: str, timeout: float = 60.0) -> int:
        """Fork a node running ``kbroker <argv>``, output appended to ``log``; returns its pid."""
        with self._lock:
            self._wait(lambda: self._ready, timeout, "start-up")
            self._stdin.write(json.dumps({"argv": argv, "log": log}) + "\n")
            self._stdin.flush()
            self._wait(lambda: bool(self._pids), timeout, "answer to a fork request")
            with self._changed:
                return self._pids.pop(0)

    def exit_status(self, pid: int) -> int | None:
        """The node's exit status, None while it runs."""
        with self._changed:
            return self._exits.get(pid)

    def wait_exit(self, pid: int, timeout: float) -> int:
        """Wait for the node to exit and return its exit status (``TimeoutError`` otherwise)."""
        self._wait(lambda: pid in self._exits, timeout, f"exit of node process {pid}")
        with self._changed:
            return self._exits.pop(pid)

