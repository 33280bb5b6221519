"""The images the container tests run, built on this machine without an image registry.

- The base: ``debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates
  bookworm`` from the Debian mirror apt already uses, trimmed (docs, man pages, locales, apt
  lists), kept as a tarball under ``~/.cache/kbroker/container-base`` (``$KBROKER_CONTAINER_CACHE``)
  and imported as ``localhost/kbroker-base:bookworm``. Once cached, a run only imports it (seconds),
  and nothing at all while the engine still holds the image.
- kbroker's image from the repository's ``Dockerfile`` with that base as ``BASE_IMAGE``, the
  system CA bundle as the ``pip-ca`` secret and the host network (pip reaches PyPI through the
  proxy these machines use), tagged ``localhost/kbroker:<package version>``.
- Apache Kafka 4.3.1 from the Maven jars ``compat.deps`` resolves (``compat/kafka_image``) with
  Debian's ``openjdk-17-jre-headless``, tagged ``localhost/kbroker-compat-kafka:4.3.1``.

``python -m compat.container_images`` builds all three and prints how long each took.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from kbroker.spark.maven import cache_dir

from compat.container_engine import Engine, ensure_podman, find_engine
from compat.deps import KAFKA_VERSION, DepsError, kafka_jars

REPO = Path(__file__).resolve().parent.parent
SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
BASE_IMAGE = f"localhost/kbroker-base:{SUITE}"
KAFKA_IMAGE = f"localhost/kbroker-compat-kafka:{KAFKA_VERSION}"
KAFKA_IMAGE_CONTEXT = Path(__file__).resolve().with_name("kafka_image")
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Files dropped from the base after debootstrap (directories stay): nothing in the images reads them.
TRIMMED = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/lib/apt/lists",
           "var/cache/apt/archives", "var/cache/debconf/templates.dat-old")
DEBOOTSTRAP_TIMEOUT_S = 900.0
BUILD_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Built:
    """An image and how long making it took this time (0 when it was already there)."""

    image: str
    seconds: float


def package_version() -> str:
    with open(REPO / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["project"]["version"]


def kbroker_image_name() -> str:
    return f"localhost/kbroker:{package_version()}"


def debian_mirror() -> str:
    """The first Debian (not security) mirror in apt's sources, one-line or deb822 format."""
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        uris = re.findall(r"^URIs:\s*(\S+)", text, re.MULTILINE)
        uris += re.findall(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+" + SUITE + r"\s", text, re.MULTILINE)
        for uri in uris:
            if "security" not in uri and uri.rstrip("/").endswith("/debian"):
                return uri
    return DEFAULT_MIRROR


def _base_tarball() -> Path:
    """The cached root filesystem; its name changes with what goes into it."""
    recipe = f"{SUITE} minbase {','.join(BASE_PACKAGES)} files removed under {TRIMMED}"
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    return cache_dir("container-base", "KBROKER_CONTAINER_CACHE") / f"{SUITE}-minbase-{key}.tar"


def ensure_base_image(engine: Engine, *, quiet: bool = False) -> Built:
    """The debootstrap base in ``engine`` (see the module docstring); ``DepsError`` if it cannot be made."""
    if engine.has_image(BASE_IMAGE):
        return Built(BASE_IMAGE, 0.0)
    started = time.monotonic()
    tarball = _base_tarball()
    if not tarball.exists():
        _debootstrap(tarball, quiet=quiet)
    engine.run("import", "--change", 'CMD ["/bin/bash"]', str(tarball), BASE_IMAGE, timeout=BUILD_TIMEOUT_S)
    return Built(BASE_IMAGE, time.monotonic() - started)


def _debootstrap(tarball: Path, *, quiet: bool) -> None:
    if os.geteuid() != 0 or (shutil.which("debootstrap") is None and not Path("/usr/sbin/debootstrap").exists()):
        raise DepsError("building the container base needs root and debootstrap (python -m compat.deps as root)")
    mirror = debian_mirror()
    if not quiet:
        print(f"compat.deps: debootstrap {SUITE} from {mirror} for the container base image ...", flush=True)
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tarball.parent, prefix="rootfs-") as work:
        root = Path(work) / "root"
        done = subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", SUITE, str(root), mirror],
            capture_output=True, text=True, timeout=DEBOOTSTRAP_TIMEOUT_S, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise DepsError(f"debootstrap failed:\n{(done.stdout + done.stderr).strip()[-3000:]}")
        for relative in TRIMMED:
            _remove_files(root / relative)
        partial = tarball.with_suffix(".partial")
        with tarfile.open(partial, "w") as tar:
            tar.add(root, arcname=".")
        partial.replace(tarball)


def _remove_files(top: Path) -> None:
    """Every file under ``top``, keeping the directories: package scripts run later in image
    builds expect them (openjdk's links its man page into /usr/share/man/man1)."""
    if not top.is_dir():
        top.unlink(missing_ok=True)
        return
    for directory, _dirs, files in os.walk(top):
        for name in files:
            os.unlink(os.path.join(directory, name))


def _build(engine: Engine, context: Path, tag: str, build_args: dict[str, str]) -> Built:
    args = ["build", "--network", "host", "-t", tag]
    if engine.name == "podman":
        args += ["--format", "docker"]  # the OCI format has no HEALTHCHECK
    for key, value in build_args.items():
        args += ["--build-arg", f"{key}={value}"]
    ca = Path(os.environ.get("PIP_CERT", CA_BUNDLE))
    if ca.exists():
        args += ["--secret", f"id=pip-ca,src={ca}"]
    started = time.monotonic()
    env_note = {"DOCKER_BUILDKIT": "1"} if engine.name == "docker" else {}
    done = subprocess.run(engine.command(*args, str(context)), capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S, check=False, env={**os.environ, **env_note})
    if done.returncode != 0:
        raise RuntimeError(f"building {tag} failed:\n{(done.stdout + done.stderr).strip()[-4000:]}")
    return Built(tag, time.monotonic() - started)


def build_kbroker_image(engine: Engine) -> Built:
    """kbroker's image from the working tree (layers cached by the engine between builds)."""
    ensure_base_image(engine)
    return _build(engine, REPO, kbroker_image_name(),
                  {"BASE_IMAGE": BASE_IMAGE, "KBROKER_VERSION": package_version()})


def build_kafka_image(engine: Engine) -> Built:
    """Apache Kafka 4.3.1 from the Maven jars; skipped while the engine holds the image."""
    if engine.has_image(KAFKA_IMAGE):
        return Built(KAFKA_IMAGE, 0.0)
    ensure_base_image(engine)
    libs = kafka_jars().ensure(quiet=True)
    with tempfile.TemporaryDirectory(prefix="kafka-image-") as work:
        context = Path(work)
        shutil.copytree(KAFKA_IMAGE_CONTEXT, context, dirs_exist_ok=True)
        (context / "libs").mkdir()
        for jar in Path(libs).glob("*.jar"):
            _link_or_copy(jar, context / "libs" / jar.name)
        return _build(engine, context, KAFKA_IMAGE, {"BASE_IMAGE": BASE_IMAGE})


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another filesystem
        shutil.copy2(source, target)


def image_size_mb(engine: Engine, image: str) -> float:
    size = engine.run("image", "inspect", "--format", "{{.Size}}", image).stdout.strip()
    return int(size) / 1e6


def prepare(*, quiet: bool = False) -> str:
    """The setup step (``compat.deps``): podman installed unless Docker answers, and the base image
    made or imported from the cache. Returns a line saying what is ready; a machine where no
    engine can run a container gets a warning (its container tests skip), not a failure."""
    engine, why = find_engine()
    if engine is None:
        ensure_podman(quiet=quiet)
        engine, why = find_engine()
    if engine is None:
        print(f"compat.deps: warning: no engine can run a container here, container tests will skip: {why}",
              file=sys.stderr)
        return "no container engine"
    base = ensure_base_image(engine, quiet=quiet)
    return f"{engine.name}, {base.image}" + (f" (made in {base.seconds:.0f} s)" if base.seconds else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.container_images", description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-kafka", action="store_true", help="do not build the Kafka image")
    args = parser.parse_args(argv)
    engine, why = find_engine()
    if engine is None:
        print(f"no container engine: {why}", file=sys.stderr)
        return 1
    builds = [ensure_base_image(engine), build_kbroker_image(engine)]
    if not args.skip_kafka:
        builds.append(build_kafka_image(engine))
    for built in builds:
        print(f"{built.image}: {image_size_mb(engine, built.image):.0f} MB, built in {built.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
