"""One container driven through the engine's command line, as a person drives ``docker run``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence

from compat.container_engine import Engine

START_TIMEOUT_S = 60.0


def unique_name(purpose: str) -> str:
    return f"kbroker-test-{purpose}-{uuid.uuid4().hex[:6]}"


class ContainerNode:
    """A named container of ``image``; ``ports`` are published on loopback (host port, container port)."""

    def __init__(self, engine: Engine, image: str, name: str, env: Mapping[str, object] | None = None,
                 ports: Sequence[tuple[int, int]] = (), volume: str | None = None, network: str | None = None,
                 entrypoint: Sequence[str] | None = None, mounts: Sequence[tuple[str, str]] = ()) -> None:
        self.engine, self.image, self.name = engine, image, name
        self.env = {k: str(v) for k, v in (env or {}).items()}
        self.ports, self.volume, self.network = ports, volume, network
        self.entrypoint, self.mounts = entrypoint, mounts

    def run(self) -> None:
        args = ["run", "-d", "--name", self.name]
        for key, value in self.env.items():
            args += ["-e", f"{key}={value}"]
        for host_port, container_port in self.ports:
            args += ["-p", f"127.0.0.1:{host_port}:{container_port}"]
        if self.volume:
            args += ["-v", f"{self.volume}:/var/lib/kbroker"]
        for source, target in self.mounts:
            args += ["-v", f"{source}:{target}:ro"]
        if self.network:
            args += ["--network", self.network]
        if self.entrypoint:
            args += ["--entrypoint", self.entrypoint[0]]
        args.append(self.image)
        if self.entrypoint:
            args += list(self.entrypoint[1:])
        self.engine.run(*args)

    def start(self) -> None:
        self.engine.run("start", self.name)

    def stop(self, timeout: int = 30) -> float:
        """``stop`` (SIGTERM, SIGKILL after ``timeout``); returns the seconds it took."""
        started = time.monotonic()
        self.engine.run("stop", "-t", str(timeout), self.name, timeout=timeout + 30)
        return time.monotonic() - started

    def kill(self) -> None:
        self.engine.run("kill", self.name)

    def remove(self) -> None:
        """Gone at once (SIGKILL), with its anonymous volume: clean stops are tested on their own,
        and a broker whose controller was removed first would wait out the stop timeout."""
        immediately = ["-t", "0"] if self.engine.name == "podman" else []  # docker rm -f kills anyway
        self.engine.run("rm", "-f", "-v", *immediately, self.name, check=False)

    def state(self, field: str) -> str:
        return self.engine.run("inspect", "--format", "{{.State." + field + "}}", self.name).stdout.strip()

    def running(self) -> bool:
        return self.state("Running") == "true"

    def exit_code(self) -> int:
        return int(self.state("ExitCode"))

    def logs(self) -> str:
        done = self.engine.run("logs", self.name, check=False)
        return done.stdout + done.stderr

    def exec(self, *args: str) -> str:
        return self.engine.run("exec", self.name, *args).stdout

    def healthy(self) -> bool:
        """The image's HEALTHCHECK, run now (podman); Docker's own verdict from its schedule."""
        if self.engine.name == "podman":
            return self.engine.run("healthcheck", "run", self.name, check=False).returncode == 0
        return self.engine.run("inspect", "--format", "{{.State.Health.Status}}", self.name).stdout.strip() == "healthy"

    def wait_healthy(self, timeout: float = START_TIMEOUT_S) -> float:
        """Seconds until the HEALTHCHECK passes; ``AssertionError`` with the logs if it never does."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.healthy():
                return time.monotonic() - started
            if not self.running():
                break
            time.sleep(0.05)
        raise AssertionError(f"{self.name} not healthy within {timeout:.0f} s (running: {self.running()}):\n"
                             f"{self.logs()[-3000:]}")
