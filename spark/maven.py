"""Jars from Maven Central in a per-user cache: ``mvn dependency:copy-dependencies`` on a pom.

A :class:`MavenJars` is one pom resolved into one dedicated directory. A marker file written
after a successful resolution (with the pom's digest and the jar names) makes later calls a
no-op; a changed pom removes exactly the jars of the old resolution first, so an old version of
a library cannot shadow the new one. A file lock serialises parallel resolutions.

Used for the Spark Kafka connector (``kbroker.spark.connector``) and, by the compat suite, for
Apache Kafka's own jars.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MARKER = ".kbroker-deps-complete"
LOCK = ".kbroker-deps.lock"
MVN_TIMEOUT_S = 900.0


class MavenError(RuntimeError):
    """The jars could not be resolved; the message says what to do."""


@dataclass(frozen=True)
class MavenJars:
    """The runtime jars of ``pom`` copied into ``libs``; ``required`` names a jar prefix whose
    absence after a successful ``mvn`` run means the pom is wrong."""

    label: str
    pom: Path
    libs: Path
    required: str
    mvn_args: Sequence[str] = field(default_factory=tuple)

    def _digest(self) -> str:
        return hashlib.sha256(self.pom.read_bytes() + "\0".join(self.mvn_args).encode()).hexdigest()

    def _marker(self) -> dict[str, object] | None:
        try:
            marker = json.loads((self.libs / MARKER).read_text())
        except (OSError, ValueError):
            return None
        return marker if isinstance(marker, dict) else None

    def complete(self) -> bool:
        """True when ``libs`` holds a finished resolution of the current pom (and its jars)."""
        marker = self._marker()
        if marker is None or marker.get("pom_sha256") != self._digest():
            return False
        jars = marker.get("jars")
        return isinstance(jars, list) and bool(jars) and all((self.libs / str(j)).is_file() for j in jars)

    def jars(self) -> list[Path]:
        """The resolved jar files (resolving first when needed)."""
        self.ensure(quiet=True)
        return sorted(self.libs.glob("*.jar"))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.libs.mkdir(parents=True, exist_ok=True)
        with open(self.libs / LOCK, "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def ensure(self, *, quiet: bool = False) -> Path:
        """Resolve the pom's runtime dependencies into ``libs`` unless already done; return ``libs``."""
        if self.complete():
            return self.libs
        mvn = shutil.which("mvn")
        if mvn is None:
            raise MavenError(
                f"Maven ('mvn') is not on PATH; it is needed once to download the {self.label} jars "
                f"into {self.libs}. Install it (Debian/Ubuntu: apt-get install maven) and rerun."
            )
        with self._locked():
            if self.complete():  # another process finished while we waited for the lock
                return self.libs
            old = self._marker()
            (self.libs / MARKER).unlink(missing_ok=True)
            old_jars = old.get("jars") if old is not None else None
            if isinstance(old_jars, list):
                for name in old_jars:
                    (self.libs / Path(str(name)).name).unlink(missing_ok=True)
            if not quiet:
                print(f"resolving the {self.label} jars into {self.libs} (mvn) ...", flush=True)
            cmd = [mvn, "-B", "-q", "-f", str(self.pom), "dependency:copy-dependencies",
                   f"-DoutputDirectory={self.libs}", "-DincludeScope=runtime", *self.mvn_args]  # fmt: skip
            try:
                result = subprocess.run(cmd, capture_output=True, text=True, timeout=MVN_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired as exc:
                raise MavenError(f"mvn did not finish within {MVN_TIMEOUT_S:.0f} s: {' '.join(cmd)}") from exc
            if result.returncode != 0:
                output = (result.stdout + result.stderr).strip()[-4000:]
                raise MavenError(
                    f"mvn failed (exit {result.returncode}) resolving {self.pom.name}; is Maven Central "
                    f"reachable?\n$ {' '.join(cmd)}\n{output}"
                )
            jars = sorted(p.name for p in self.libs.glob("*.jar"))
            if not any(j.startswith(self.required) for j in jars):
                raise MavenError(f"mvn succeeded but {self.libs} holds no {self.required} jar")
            (self.libs / MARKER).write_text(json.dumps({"pom_sha256": self._digest(), "jars": jars}, indent=1))
        if not quiet:
            print(f"{self.label}: {len(jars)} jars in {self.libs}", flush=True)
        return self.libs


def cache_dir(name: str, env: str) -> Path:
    """``$env`` when set, else ``~/.cache/kbroker/<name>``."""
    override = os.environ.get(env)
    return Path(override).expanduser() if override else Path.home() / ".cache" / "kbroker" / name
