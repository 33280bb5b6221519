"""A real kbroker process for tests: started with ``python -m kbroker serve``, on loopback.

Tests talk to it over real sockets with real Kafka clients. ``kill()`` is SIGKILL (crash),
``stop()`` is SIGTERM (clean shutdown); ``start()`` again reuses the same port and data.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import subprocess
import sys
import time

from kbroker.testing.ports import free_port


class BrokerProcess:
    def __init__(self, data_dir: str, overrides: dict[str, str] | None = None, port: int | None = None,
                 open_file_limit: int | None = None, extra_args: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra_args = extra_args or []  # more ``serve`` arguments, e.g. --add-scram
        self.open_file_limit = open_file_limit  # RLIMIT_NOFILE (soft and hard) of the broker process
        self.port = port or free_port()
        self.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": data_dir,
            **(overrides or {}),
        }
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = os.path.join(os.path.dirname(data_dir.rstrip("/")) or ".", f"broker-{self.port}.log")
        self.banner = ""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        args = [sys.executable, "-m", "kbroker", "serve"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        args += self.extra_args
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True,
                                     preexec_fn=self._limit_open_files if self.open_file_limit else None)
        log.close()
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if "listening on" in line:
                    self.banner = line.strip()
                    return
                if not line and self.proc.poll() is not None:
                    break
            elif self.proc.poll() is not None:
                break
        raise RuntimeError(f"broker did not start; see {self.log_path}:\n{self.read_log()[-3000:]}")

    def _limit_open_files(self) -> None:
        assert self.open_file_limit is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_file_limit, self.open_file_limit))

    @property
    def open_descriptors(self) -> int:
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def read_log(self) -> str:
        with open(self.log_path) as fh:
            return fh.read()

    def stop(self, timeout: float = 20.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        self.proc = None
        return code

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
