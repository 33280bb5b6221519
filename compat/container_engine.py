"""The container engine the suite drives: Docker where one answers, else podman.

These machines have no Docker engine; podman (Debian's ``podman`` and ``runc``) runs containers
as root with ``--cgroup-manager=cgroupfs --runtime runc`` (no systemd here) and with
``default_ulimits = []`` in ``/etc/containers/containers.conf`` (its default ulimits cannot be
set inside this sandbox). :func:`ensure_podman` installs and configures it (``compat.deps``
calls it, as it installs kcat). :func:`find_engine` answers which engine can run a container,
or why none can; container tests skip with that reason. :func:`docker_api` gives
testcontainers a Docker-compatible API socket (``podman system service``) for a block of code.
"""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from compat.deps import DepsError, apt_install

CONTAINERS_CONF = Path("/etc/containers/containers.conf")
PODMAN_PACKAGES = ("podman", "runc", "debootstrap")
ENGINE_ENV = "KBROKER_CONTAINER_ENGINE"  # "docker" or "podman" forces one
PROBE_TIMEOUT_S = 60.0
API_START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Engine:
    """A container engine CLI: ``argv`` is the command prefix (with podman's global flags)."""

    name: str
    argv: tuple[str, ...]

    def command(self, *args: str) -> list[str]:
        return [*self.argv, *args]

    def run(self, *args: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        """One engine command; raises ``RuntimeError`` with its output when ``check`` and it fails."""
        done = subprocess.run(self.command(*args), capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(self.command(*args))} exited {done.returncode}:\n"
                               f"{(done.stdout + done.stderr).strip()[-3000:]}")
        return done

    def has_image(self, image: str) -> bool:
        return self.run("image", "inspect", image, check=False).returncode == 0


def podman() -> Engine:
    """podman with the flags it needs as root without systemd (none otherwise)."""
    flags = ("--cgroup-manager=cgroupfs", "--runtime", "runc") if os.geteuid() == 0 else ()
    return Engine("podman", ("podman", *flags))


def ensure_podman(*, quiet: bool = False) -> Engine:
    """podman ready to run containers here: the Debian packages installed when missing (as root)
    and the ulimits setting written; raises ``DepsError`` when it cannot be installed."""
    missing = [p for p, tool in zip(PODMAN_PACKAGES, ("podman", "runc", "debootstrap"), strict=True)
               if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists()]
    if missing:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            raise DepsError(f"{', '.join(missing)} not installed; on Debian/Ubuntu: "
                            f"sudo apt-get install {' '.join(PODMAN_PACKAGES)}")
        if not quiet:
            print(f"compat.deps: installing {' '.join(missing)} (apt-get) ...", flush=True)
        apt_install(*missing)
    if os.geteuid() == 0:
        _no_default_ulimits()
    return podman()


def _no_default_ulimits() -> None:
    """podman's default ulimits (raising RLIMIT_NPROC and friends) fail inside this sandbox."""
    text = CONTAINERS_CONF.read_text() if CONTAINERS_CONF.exists() else ""
    if "default_ulimits" in text:
        return
    if "[containers]" in text:
        text = text.replace("[containers]", "[containers]\ndefault_ulimits = []", 1)
    else:
        text += "\n[containers]\ndefault_ulimits = []\n"
    CONTAINERS_CONF.parent.mkdir(parents=True, exist_ok=True)
    CONTAINERS_CONF.write_text(text)


def find_engine() -> tuple[Engine | None, str]:
    """(engine, "") when one can run a container here, else (None, why not)."""
    forced = os.environ.get(ENGINE_ENV, "")
    candidates = []
    if forced in ("", "docker") and shutil.which("docker"):
        candidates.append(Engine("docker", ("docker",)))
    if forced in ("", "podman") and shutil.which("podman"):
        candidates.append(podman())
    reasons = []
    for engine in candidates:
        try:
            info = engine.run("info", timeout=PROBE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons.append(f"{engine.name}: {exc}")
            continue
        if info.returncode == 0:
            return engine, ""
        reasons.append(f"{engine.name} info: {(info.stdout + info.stderr).strip().splitlines()[-1:]}")
    if not candidates:
        reasons.append("neither docker nor podman is installed (python -m compat.deps installs podman as root)")
    return None, "; ".join(reasons)


@contextmanager
def docker_api(engine: Engine) -> Iterator[str]:
    """A Docker-compatible API address (DOCKER_HOST form) for ``engine`` while the block runs.

    For podman, ``podman system service`` on a socket of its own, stopped afterwards; for Docker,
    the engine's own address. The caller passes it to the Docker client it creates instead of
    exporting DOCKER_HOST, so nothing else in the process (compat's engine detection) sees it.
    """
    if engine.name == "docker":
        yield os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        return
    with tempfile.TemporaryDirectory(prefix="kbroker-podman-api-") as directory:
        path = os.path.join(directory, "podman.sock")
        log = open(os.path.join(directory, "service.log"), "wb")
        service = subprocess.Popen(engine.command("system", "service", "--time=0", f"unix://{path}"),
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            _wait_for_api(path, service)
            yield f"unix://{path}"
        finally:
            service.terminate()
            try:
                service.wait(10)
            except subprocess.TimeoutExpired:
                service.kill()
                service.wait()
            log.close()


def _wait_for_api(path: str, service: subprocess.Popen[bytes]) -> None:
    """Return once the API socket answers ``GET /_ping``."""
    deadline = time.monotonic() + API_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if service.poll() is not None:
            raise RuntimeError(f"podman system service exited {service.returncode}")
        try:
            connection = _UnixHTTPConnection(path)
            connection.request("GET", "/_ping")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"podman system service did not answer on {path} within {API_START_TIMEOUT_S:.0f} s")


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=2.0)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(2.0)
        self.sock.connect(self.path)
