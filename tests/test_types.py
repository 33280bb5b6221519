"""protocol/, storage/ and replication/ type-check under mypy --strict (configuration: [tool.mypy]
in pyproject.toml).

The folders install as kbroker.protocol, kbroker.storage and kbroker.replication, through
setuptools' editable-install import hook, which mypy does not run. So the check links the three
folders under .mypy_cache/kbroker-namespace/kbroker/ (the mypy_path of the configuration) and
mypy reads the kbroker namespace from there; errors name files by that path. By hand::

    python tests/test_types.py
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAMESPACE = ROOT / ".mypy_cache" / "kbroker-namespace" / "kbroker"
PACKAGES = ("protocol", "storage", "replication")


def link_namespace() -> None:
    """.mypy_cache/kbroker-namespace/kbroker/<folder> -> <folder>, for each engine package."""
    NAMESPACE.mkdir(parents=True, exist_ok=True)
    for folder in PACKAGES:
        link = NAMESPACE / folder
        target = pathlib.Path("..", "..", "..", folder)
        if link.is_symlink() and os.readlink(link) == str(target):
            continue
        temporary = link.with_name(f".{folder}.{os.getpid()}")
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(target, target_is_directory=True)
        os.replace(temporary, link)  # atomic: a concurrent run sees the old link or the new one


def run_mypy() -> subprocess.CompletedProcess[str]:
    link_namespace()
    return subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)


def test_engine_packages_type_check_strictly() -> None:
    result = run_mypy()
    assert result.returncode == 0, result.stdout + result.stderr


if __name__ == "__main__":
    completed = run_mypy()
    sys.stdout.write(completed.stdout + completed.stderr)
    sys.exit(completed.returncode)
