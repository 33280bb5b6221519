"""Compiles and runs the Java side of the suite: ``compat/java/*.java`` in one long-lived JVM.

The sources are compiled with ``javac`` against the cached Kafka jars once per source
version into ``~/.cache/kbroker/compat-java/<digest>`` (reused by later sessions; a
concurrent session compiles into its own temporary directory and renames it into place).
``JavaDriver`` starts ``CompatDriver`` and exchanges one JSON line per request; a request
that gets no answer within its deadline kills the JVM (the next request starts a new one).
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from compat.deps import kafka_classpath, libs_dir

SOURCES = Path(__file__).resolve().parent.parent / "java"
CACHE = Path(os.environ.get("KBROKER_COMPAT_JAVA_CACHE", Path.home() / ".cache" / "kbroker" / "compat-java"))
# Tool log lines at ERROR reach the tool's (captured) stderr, without timestamps, as with
# Kafka's own tools logging; everything from WARN up also goes to driver.log.
JVM_FLAGS = ["-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]
LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.follow = true
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m%n%throwable{{short}}%n
appender.err.filter.level.type = ThresholdFilter
appender.err.filter.level.level = error
rootLogger.level = warn
rootLogger.appenderRef.file.ref = FILE
rootLogger.appenderRef.err.ref = STDERR
"""


class JavaDriverError(RuntimeError):
    """The driver JVM failed a request (its stack trace is the message) or did not answer."""


def compiled_classes() -> Path:
    """Directory holding the compiled driver classes (compiling them on first use)."""
    classpath = kafka_classpath()
    digest = hashlib.sha256()
    for src in sorted(SOURCES.glob("*.java")):
        digest.update(src.name.encode() + b"\0" + src.read_bytes())
    digest.update("\n".join(sorted(p.name for p in libs_dir().glob("*.jar"))).encode())
    target = CACHE / digest.hexdigest()[:16]
    if (target / "CompatDriver.class").exists():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise JavaDriverError("javac is not on PATH; the Java client stack needs a JDK 17+")
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=CACHE, prefix="build-"))
    result = subprocess.run(
        [javac, "-nowarn", "-d", str(tmp), "-cp", classpath, *map(str, sorted(SOURCES.glob("*.java")))],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise JavaDriverError(f"javac failed:\n{result.stdout}{result.stderr}")
    try:
        tmp.rename(target)
    except OSError:  # another session won the race; its classes are identical
        shutil.rmtree(tmp, ignore_errors=True)
    return target


class JavaDriver:
    """One CompatDriver JVM; ``call(op, **args)`` sends a request and returns its "ok" value."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log4j = self.workdir / "driver-log4j2.properties"
        self.log4j.write_text(LOG4J2.format(log=self.workdir / "driver.log"))
        self.proc: subprocess.Popen[bytes] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        classes = compiled_classes()
        with open(self.workdir / "driver-stderr.log", "ab") as stderr:
            proc = subprocess.Popen(
                ["java", *JVM_FLAGS, f"-Dlog4j2.configurationFile={self.log4j}",
                 "-cp", f"{classes}{os.pathsep}{kafka_classpath()}", "CompatDriver"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=self.workdir,
            )  # fmt: skip
        self.proc = proc
        ready = self._read_line(60.0)
        if json.loads(ready).get("ready") is not True:
            raise JavaDriverError(f"unexpected driver greeting {ready!r}")
        return proc

    def _read_line(self, timeout: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        chunks = b""
        while not chunks.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, remaining))
            if not ready:
                self.close()
                raise JavaDriverError(f"the Java driver did not answer within {timeout:.0f} s")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                self.close()
                raise JavaDriverError(f"the Java driver exited; see {self.workdir}/driver-stderr.log")
            chunks += chunk
        return chunks.decode()

    def call(self, op: str, timeout: float = 90.0, **args: Any) -> Any:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}).encode() + b"\n")
        self.proc.stdin.flush()
        answer = json.loads(self._read_line(timeout))
        if "fail" in answer:
            raise JavaDriverError(answer["fail"])
        return answer["ok"]

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                assert self.proc.stdin is not None
                try:
                    self.proc.stdin.close()
                    self.proc.wait(10)
                except (OSError, subprocess.TimeoutExpired):
                    self.proc.kill()
                    self.proc.wait()
            self.proc = None
