"""Install the test suite's non-pip dependencies: Apache Kafka's jars and kcat.

``python -m compat.deps`` resolves the pinned Kafka jars listed in ``kafka-jars.pom.xml`` with
Maven into a cache directory (``~/.cache/kbroker/kafka-4.3.1/libs``, or ``$KBROKER_KAFKA_LIBS``)
and makes sure ``kcat`` is on PATH (installing the Debian package when running as root). A
marker file written after a successful resolution makes later runs a no-op. It exits non-zero
with a message saying what is missing when it cannot finish.

Tests call :func:`kafka_classpath` for a ``java -cp`` value (resolving the jars on first use).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

KAFKA_VERSION = "4.3.1"
POM = Path(__file__).resolve().with_name("kafka-jars.pom.xml")
LIBS_ENV = "KBROKER_KAFKA_LIBS"
MARKER = ".kbroker-deps-complete"
LOCK = ".kbroker-deps.lock"
MVN_TIMEOUT = 900.0
APT_TIMEOUT = 900.0


class DepsError(RuntimeError):
    """A dependency is missing and could not be installed; the message says what to do."""


def libs_dir() -> Path:
    """Where the Kafka jars live: ``$KBROKER_KAFKA_LIBS`` or the per-user cache.

    The directory is dedicated to these jars: every jar in it is on the classpath.
    """
    override = os.environ.get(LIBS_ENV)
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "kbroker" / f"kafka-{KAFKA_VERSION}" / "libs"


def _pom_digest() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()


def _read_marker(libs: Path) -> dict[str, object] | None:
    try:
        marker = json.loads((libs / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def jars_complete(libs: Path | None = None) -> bool:
    """True when ``libs`` holds a finished resolution of the current pom (and its jars)."""
    libs = libs or libs_dir()
    marker = _read_marker(libs)
    if marker is None or marker.get("pom_sha256") != _pom_digest():
        return False
    jars = marker.get("jars")
    return isinstance(jars, list) and bool(jars) and all((libs / str(j)).is_file() for j in jars)


@contextlib.contextmanager
def _locked(libs: Path) -> Iterator[None]:
    """Serialise resolutions into one directory (parallel test sessions, xdist workers)."""
    libs.mkdir(parents=True, exist_ok=True)
    with open(libs / LOCK, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_kafka_jars(libs: Path | None = None, *, quiet: bool = False) -> Path:
    """Resolve the pom's runtime dependencies into ``libs`` unless already done; return ``libs``."""
    libs = libs or libs_dir()
    if jars_complete(libs):
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DepsError(
            f"Maven ('mvn') is not on PATH; it is needed once to download the Kafka "
            f"{KAFKA_VERSION} jars into {libs}. Install it (Debian/Ubuntu: apt-get install "
            "maven) and rerun `python -m compat.deps`."
        )
    with _locked(libs):
        if jars_complete(libs):  # another process finished while we waited for the lock
            return libs
        # A stale resolution (the pom changed): remove the jars its marker lists, and only those,
        # so an old version of a library cannot shadow the new one on the classpath.
        old = _read_marker(libs)
        (libs / MARKER).unlink(missing_ok=True)
        old_jars = old.get("jars") if old is not None else None
        if isinstance(old_jars, list):
            for name in old_jars:
                (libs / Path(str(name)).name).unlink(missing_ok=True)
        if not quiet:
            print(
                f"compat.deps: resolving Kafka {KAFKA_VERSION} jars into {libs} (mvn) ...",
                flush=True,
            )
        cmd = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(POM),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={libs}",
            "-DincludeScope=runtime",
        ]
        try:
            result = subprocess.run(
                cmd, capture_output=True, text=True, timeout=MVN_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise DepsError(
                f"mvn did not finish within {MVN_TIMEOUT:.0f} s: {' '.join(cmd)}"
            ) from exc
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()[-4000:]
            raise DepsError(
                f"mvn failed (exit {result.returncode}) resolving {POM.name}; is Maven Central "
                f"reachable?\n$ {' '.join(cmd)}\n{output}"
            )
        jars = sorted(p.name for p in libs.glob("*.jar"))
        if not any(j.startswith(f"kafka-tools-{KAFKA_VERSION}") for j in jars):
            raise DepsError(f"mvn succeeded but {libs} holds no kafka-tools-{KAFKA_VERSION} jar")
        (libs / MARKER).write_text(
            json.dumps({"pom_sha256": _pom_digest(), "jars": jars}, indent=1)
        )
    if not quiet:
        print(f"compat.deps: {len(jars)} jars in {libs}", flush=True)
    return libs


def kafka_classpath(*, resolve: bool = True) -> str:
    """A ``java -cp`` value holding Kafka's jars (resolving them first if ``resolve``)."""
    libs = libs_dir()
    if resolve:
        ensure_kafka_jars(libs, quiet=True)
    elif not jars_complete(libs):
        raise DepsError(f"Kafka jars are not in {libs}; run `python -m compat.deps`")
    return f"{libs}{os.sep}*"


def _apt_install(package: str) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}

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

    if run("install", "-y", package).returncode == 0:
        return
    update = run("update")  # the package lists may be missing or stale (fresh containers)
    if update.returncode != 0:
        raise DepsError(
            f"apt-get update failed:\n{(update.stdout + update.stderr).strip()[-2000:]}"
        )
    install = run("install", "-y", package)
    if install.returncode != 0:
        raise DepsError(
            f"apt-get install -y {package} failed:\n"
            f"{(install.stdout + install.stderr).strip()[-2000:]}"
        )


def ensure_kcat(*, quiet: bool = False) -> str:
    """Path of ``kcat``, installing it with apt-get when missing and running as root."""
    found = shutil.which("kcat")
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise DepsError(
            "kcat is not on PATH. Install it (Debian/Ubuntu: `sudo apt-get install kcat`, "
            "macOS: `brew install kcat`) and rerun `python -m compat.deps`."
        )
    if not quiet:
        print("compat.deps: installing kcat (apt-get) ...", flush=True)
    _apt_install("kcat")
    found = shutil.which("kcat")
    if found is None:
        raise DepsError("apt-get installed kcat but it is still not on PATH")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compat.deps", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--skip-jars", action="store_true", help="do not resolve the Kafka jars")
    parser.add_argument("--skip-kcat", action="store_true", help="do not check for or install kcat")
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
            libs = ensure_kafka_jars()
            print(f"compat.deps: Kafka {KAFKA_VERSION} jars ready: {libs}")
        if not args.skip_kcat:
            print(f"compat.deps: kcat ready: {ensure_kcat()}")
    except DepsError as exc:
        print(f"compat.deps: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
