"""Install the test suite's non-pip dependencies: Apache Kafka's jars, Spark's Kafka connector
jars, kcat, Debian's chromium and chromium-driver (the browser tests), the franz-go compat
driver, and a container engine with its base image (``compat.container_images``).

``python -m compat.deps`` resolves the pinned Kafka jars listed in ``kafka-jars.pom.xml`` with
Maven into a cache directory (``~/.cache/kbroker/kafka-4.3.1/libs``, or ``$KBROKER_KAFKA_LIBS``),
the Spark connector jars the same way (``kbroker.spark.connector``), and makes sure ``kcat``,
``chromium`` and ``chromedriver`` are on PATH (installing the Debian packages when running as
root). A marker file written after a successful resolution makes later runs a no-op. The
franz-go driver (``compat/franz``, a Go module) is built with the Go toolchain once per source
digest into ``~/.cache/kbroker/compat-franz/<digest>/franz-driver``
(``$KBROKER_COMPAT_FRANZ_CACHE``); its modules come from the module cache or the configured Go
proxy. It exits non-zero with a message saying what is missing when it cannot finish.

Tests call :func:`kafka_classpath` for a ``java -cp`` value (resolving the jars on first use).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kbroker.spark.connector import connector_jars
from kbroker.spark.maven import MavenError, MavenJars, cache_dir

KAFKA_VERSION = "4.3.1"
POM = Path(__file__).resolve().with_name("kafka-jars.pom.xml")
LIBS_ENV = "KBROKER_KAFKA_LIBS"
APT_TIMEOUT = 900.0
FRANZ_SOURCES = Path(__file__).resolve().with_name("franz")
FRANZ_CACHE_ENV = "KBROKER_COMPAT_FRANZ_CACHE"
GO_BUILD_TIMEOUT = 900.0  # a cold build compiles the standard library too: ~2 CPU-minutes

DepsError = MavenError


def libs_dir() -> Path:
    """Where the Kafka jars live: ``$KBROKER_KAFKA_LIBS`` or the per-user cache.

    The directory is dedicated to these jars: every jar in it is on the classpath.
    """
    return cache_dir(f"kafka-{KAFKA_VERSION}/libs", LIBS_ENV)


def kafka_jars() -> MavenJars:
    return MavenJars(f"Kafka {KAFKA_VERSION}", POM, libs_dir(), required=f"kafka-tools-{KAFKA_VERSION}")


def kafka_classpath(*, resolve: bool = True) -> str:
    """A ``java -cp`` value holding Kafka's jars (resolving them first if ``resolve``)."""
    jars = kafka_jars()
    if resolve:
        jars.ensure(quiet=True)
    elif not jars.complete():
        raise DepsError(f"Kafka jars are not in {jars.libs}; run `python -m compat.deps`")
    return f"{jars.libs}{os.sep}*"


def apt_install(*packages: str) -> None:
    """``apt-get install -y`` the Debian packages, updating the package lists once if needed."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    names = " ".join(packages)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                ["apt-get", *args],
                capture_output=True,
                text=True,
                env=env,
                timeout=APT_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise DepsError(
                f"apt-get {' '.join(args)} did not finish in {APT_TIMEOUT:.0f} s"
            ) from exc

    if run("install", "-y", *packages).returncode == 0:
        return
    update = run("update")  # the package lists may be missing or stale (fresh containers)
    if update.returncode != 0:
        raise DepsError(
            f"apt-get update failed:\n{(update.stdout + update.stderr).strip()[-2000:]}"
        )
    install = run("install", "-y", *packages)
    if install.returncode != 0:
        raise DepsError(
            f"apt-get install -y {names} failed:\n"
            f"{(install.stdout + install.stderr).strip()[-2000:]}"
        )


# Debian packages the suite runs, by the command each provides: kcat for the compat clients, Debian's
# Chromium and its ChromeDriver for the console's browser tests (tests/browser).
DEBIAN_TOOLS = {"kcat": "kcat", "chromium": "chromium", "chromedriver": "chromium-driver"}


def ensure_debian_tools(*, quiet: bool = False) -> dict[str, str]:
    """Paths of the commands in ``DEBIAN_TOOLS``, installing the missing ones' packages with
    apt-get when running as root."""
    missing = [package for command, package in DEBIAN_TOOLS.items() if shutil.which(command) is None]
    if missing:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            raise DepsError(
                f"not on PATH: {', '.join(missing)}. Install them (Debian/Ubuntu: `sudo apt-get install "
                f"{' '.join(missing)}`; kcat on macOS: `brew install kcat`) and rerun `python -m compat.deps`."
            )
        if not quiet:
            print(f"compat.deps: installing {' '.join(missing)} (apt-get) ...", flush=True)
        apt_install(*missing)
    found = {command: shutil.which(command) for command in DEBIAN_TOOLS}
    absent = [command for command, path in found.items() if path is None]
    if absent:
        raise DepsError(f"apt-get installed the packages but {', '.join(absent)} is still not on PATH")
    return {command: path for command, path in found.items() if path is not None}


def go_binary() -> str | None:
    """The ``go`` command: on PATH, or where the official Go archive installs it."""
    found = shutil.which("go")
    if found is None and os.access("/usr/local/go/bin/go", os.X_OK):
        found = "/usr/local/go/bin/go"
    return found


def franz_driver() -> Path:
    """The franz-go compat driver binary, built from ``compat/franz`` on first use per source
    digest (a concurrent build goes to its own temporary directory, renamed into place)."""
    digest = hashlib.sha256()
    for src in sorted(FRANZ_SOURCES.iterdir()):
        if src.suffix == ".go" or src.name in ("go.mod", "go.sum"):
            digest.update(src.name.encode() + b"\0" + src.read_bytes())
    cache = Path(os.environ.get(FRANZ_CACHE_ENV, Path.home() / ".cache" / "kbroker" / "compat-franz"))
    target = cache / digest.hexdigest()[:16]
    binary = target / "franz-driver"
    if binary.exists():
        return binary
    go = go_binary()
    if go is None:
        raise DepsError("no 'go' on PATH; the franz-go compat client needs Go 1.26+ (https://go.dev/dl/)")
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache, prefix="build-"))
    try:
        result = subprocess.run(
            [go, "build", "-trimpath", "-buildvcs=false", "-o", str(tmp / "franz-driver"), "."],
            cwd=FRANZ_SOURCES, capture_output=True, text=True, timeout=GO_BUILD_TIMEOUT, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DepsError(f"go build of the franz-go driver did not finish in {GO_BUILD_TIMEOUT:.0f} s") from exc
    if result.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DepsError(f"go build of the franz-go driver failed:\n{result.stdout}{result.stderr}")
    try:
        tmp.rename(target)
    except OSError:  # another session built the same sources first
        shutil.rmtree(tmp, ignore_errors=True)
    return binary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compat.deps", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--skip-jars", action="store_true", help="do not resolve the Kafka jars")
    parser.add_argument("--skip-spark", action="store_true", help="do not resolve the Spark connector jars")
    parser.add_argument("--skip-apt", action="store_true",
                        help="do not check for or install kcat, chromium and chromium-driver")
    parser.add_argument("--skip-franz", action="store_true", help="do not build the franz-go compat driver")
    parser.add_argument("--skip-containers", action="store_true",
                        help="do not install podman or make the container base image")
    args = parser.parse_args(argv)
    try:
        if not args.skip_jars:
            if shutil.which("java") is None:
                print(
                    "compat.deps: warning: no 'java' on PATH; the Java CLI tests need a JRE 17+",
                    file=sys.stderr,
                )
            elif shutil.which("javac") is None:
                print(
                    "compat.deps: warning: no 'javac' on PATH; the compat suite compiles its Java "
                    "client driver and needs a JDK 17+",
                    file=sys.stderr,
                )
            print(f"compat.deps: Kafka {KAFKA_VERSION} jars ready: {kafka_jars().ensure()}")
        if not args.skip_spark:
            print(f"compat.deps: Spark Kafka connector jars ready: {connector_jars().ensure()}")
        if not args.skip_apt:
            tools = ensure_debian_tools()
            print(f"compat.deps: Debian tools ready: {', '.join(tools.values())}")
        if not args.skip_franz:
            print(f"compat.deps: franz-go driver ready: {franz_driver()}")
        if not args.skip_containers:
            from compat.container_images import prepare  # imports this module

            print(f"compat.deps: container engine ready: {prepare()}")
    except DepsError as exc:
        print(f"compat.deps: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
